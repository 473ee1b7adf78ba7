//go:build linux

package btrfs_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestFsckImagesWrite changes every one of btrfs-progs' own fsck test
// images (testdata/fsck-tests) as a user would: open it for writing, make a
// directory, write a small file, rename it, close (which commits).
//
// On an image both btrfs-progs 6.2 and 6.19 call clean, the change either
// succeeds and `btrfs check` stays clean, or it is refused up front with
// an error matching btrfs.ErrUnsupported, the image's bytes unchanged. On
// a damaged image nothing panics, and either the change is refused
// (ErrCorrupt or ErrUnsupported; or ErrNoSpace) with the bytes unchanged, or it succeeds
// and the check of 6.2 finds no kind of problem it did not find before.
//
// The images from btrfs-image dumps have their data blocks zeroed, so
// data checksums are not checked.
func TestFsckImagesWrite(t *testing.T) {
	btrfstest.RequireProgs(t)
	for _, im := range btrfstest.FsckImages(t) {
		t.Run(im.Name, func(t *testing.T) {
			img := btrfstest.RestoreFsckImage(t, im.Name)
			clean := im.Check62 == 0 && im.Check619 == 0
			beforeStatus, beforeProblems := checkProblems(t, img)
			if beforeStatus != im.Check62 {
				t.Logf("btrfs check status %d, verdicts.txt says %d", beforeStatus, im.Check62)
			}
			sum := sparseSum(t, img)
			err := fsckImageChange(img)
			if err != nil {
				if after := sparseSum(t, img); after != sum {
					t.Fatalf("failed change wrote to the image: %v", err)
				}
				switch {
				case errors.Is(err, btrfs.ErrUnsupported):
					t.Logf("refused: %v", err)
				case !clean && errors.Is(err, btrfs.ErrCorrupt):
					t.Logf("refused as damaged: %v", err)
				case errors.Is(err, btrfs.ErrNoSpace):
					t.Logf("no space: %v", err)
				default:
					t.Fatalf("change failed (clean %v) with neither ErrUnsupported nor ErrCorrupt: %v", clean, err)
				}
				return
			}
			t.Logf("changed")
			afterStatus, afterProblems := checkProblems(t, img)
			if clean {
				if afterStatus != 0 {
					t.Fatalf("btrfs check after our change: status %d\n%s", afterStatus, strings.Join(afterProblems, "\n"))
				}
				btrfstest.CheckNewer(t, img, false)
				return
			}
			if afterStatus > beforeStatus {
				t.Fatalf("btrfs check status %d after our change, %d before\n%s", afterStatus, beforeStatus, strings.Join(afterProblems, "\n"))
			}
			if extra := newKinds(beforeProblems, afterProblems); len(extra) > 0 {
				t.Fatalf("btrfs check finds new kinds of problem after our change:\n%s\nbefore:\n%s",
					strings.Join(extra, "\n"), strings.Join(beforeProblems, "\n"))
			}
		})
	}
}

// fsckImageChange is the small change made to every image.
func fsckImageChange(img string) (err error) {
	// No commits of the FS's own (an ENOSPC flush would write the
	// changes before a refused one): a refused change leaves the bytes.
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{DirtyLimit: -1, CommitInterval: -1})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fsys.Rollback()
		}
		if cerr := fsys.Close(); err == nil {
			err = cerr
		}
	}()
	if err := fsys.Mkdir("gobtrfs-fsck", 0o755); err != nil {
		return err
	}
	if err := fsys.WriteFile("gobtrfs-fsck/a", []byte("written by gobtrfs\n"), 0o644); err != nil {
		return err
	}
	return fsys.Rename("gobtrfs-fsck/a", "gobtrfs-fsck/b")
}

// checkProblems runs the installed `btrfs check --readonly` on img and
// returns its exit status and the lines that report problems (progress
// and summary lines dropped).
func checkProblems(t *testing.T, img string) (int, []string) {
	t.Helper()
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command("btrfs", append(append([]string{"check", "--readonly"}, args...), img)...)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		return cmd.CombinedOutput()
	}
	out, err := run()
	if err != nil && strings.Contains(string(out), "is currently mounted") {
		// Another test (or process) has a copy of the same image, with
		// the same fsid, mounted: this file is not, skip that check.
		out, err = run("--force")
	}
	status := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("btrfs check --readonly %s: %v\n%s", img, err, out)
		}
		status = 1
	}
	var problems []string
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "[") || strings.HasPrefix(l, "Opening filesystem") ||
			strings.HasPrefix(l, "Checking filesystem") || strings.HasPrefix(l, "UUID:") ||
			strings.HasPrefix(l, "found ") || strings.HasPrefix(l, "total ") ||
			strings.HasPrefix(l, "file data blocks") || strings.HasPrefix(l, "btree space waste") ||
			strings.HasPrefix(l, "cache and super generation") || strings.HasPrefix(l, "Qgroup are marked") || strings.HasPrefix(l, "Rescan hasn't been") {
			continue
		}
		problems = append(problems, l)
	}
	return status, problems
}

// numbers matches what differs between two reports of one kind of problem.
var numbers = regexp.MustCompile(`[0-9]+`)

// newKinds returns the problem lines of after whose kind (the line with
// its numbers blanked) is not among before's.
func newKinds(before, after []string) []string {
	kinds := map[string]bool{}
	for _, l := range before {
		kinds[numbers.ReplaceAllString(l, "N")] = true
	}
	var extra []string
	for _, l := range after {
		if !kinds[numbers.ReplaceAllString(l, "N")] {
			extra = append(extra, l)
		}
	}
	sort.Strings(extra)
	return extra
}

// imageSum hashes the data regions of a possibly sparse (terabytes) image
// file with their offsets, reading only what SEEK_DATA finds.
func sparseSum(t *testing.T, img string) [32]byte {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	fd := int(f.Fd())
	var off int64
	buf := make([]byte, 1<<20)
	for off < st.Size() {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		var hdr [16]byte
		binary.LittleEndian.PutUint64(hdr[:8], uint64(data))
		binary.LittleEndian.PutUint64(hdr[8:], uint64(hole-data))
		h.Write(hdr[:])
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f, data, hole-data), buf); err != nil {
			t.Fatal(err)
		}
		off = hole
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}
