package btrfstest

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FsckImage is one of btrfs-progs' own fsck test images (their
// tests/fsck-tests), committed under testdata/fsck-tests as NAME.zst, with
// the exit status of `btrfs check --readonly` on the restored image by
// btrfs-progs 6.2 and 6.19 (0 clean, 1 damage found). The images were made
// by the btrfs-progs developers, each to hold one kind of damage or, for
// the "false alert" ones, none. 6.19's verdict is the one to aim at: it
// finds damage in 8 images 6.2 calls clean.
type FsckImage struct {
	Name       string // e.g. "004-no-dir-index__default_case.img"
	Check62    int    // btrfs check --readonly exit status, btrfs-progs 6.2
	Check619   int    // the same, btrfs-progs 6.19
	NeedsProgs bool   // a btrfs-image metadata dump: restoring it runs btrfs-image -r
}

// Clean reports whether btrfs-progs 6.19 calls the image clean.
func (i FsckImage) Clean() bool { return i.Check619 == 0 }

// FsckDir is the directory of the committed fsck test images.
func FsckDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(ModuleRoot(tb), "testdata", "fsck-tests")
}

// FsckImages lists the committed fsck test images in name order, from
// testdata/fsck-tests/verdicts.txt.
func FsckImages(tb testing.TB) []FsckImage {
	tb.Helper()
	dir := FsckDir(tb)
	f, err := os.Open(filepath.Join(dir, "verdicts.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []FsckImage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			tb.Fatalf("verdicts.txt: bad line %q", line)
		}
		a, err1 := strconv.Atoi(fields[1])
		b, err2 := strconv.Atoi(fields[2])
		if err1 != nil || err2 != nil {
			tb.Fatalf("verdicts.txt: bad line %q", line)
		}
		img := FsckImage{Name: fields[0], Check62: a, Check619: b}
		img.NeedsProgs = !strings.HasSuffix(img.Name, ".raw")
		out = append(out, img)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// btrfsMagicOffset is where a raw image holds "_BHRfS_M": the primary
// superblock at 64 KiB, its magic 0x40 bytes in.
const btrfsMagicOffset = 0x10040

// RestoreFsckImage returns the path of a raw, writable copy of the fsck
// test image named name, in tb.TempDir(). A btrfs-image metadata dump is
// restored with `btrfs-image -r` (the test skips without btrfs-progs unless
// GOBTRFS_INTEROP=1); a raw image is decompressed sparsely. Restored images
// keep the dumped device size and may be sparse files of terabytes: never
// read them whole.
func RestoreFsckImage(tb testing.TB, name string) string {
	tb.Helper()
	src := filepath.Join(FsckDir(tb), name+".zst")
	dir := tb.TempDir()
	plain := filepath.Join(dir, "plain")
	// Decompressing is most of the cost (and ten times more under the
	// race detector): go through the fixture cache as OpenFixture does.
	cached, err := cachedFixture(src)
	if err == nil {
		err = sparseCopy(cached, plain)
	}
	if err != nil {
		os.Remove(plain)
		err = decompressFile(src, plain)
	}
	if err != nil {
		tb.Fatalf("RestoreFsckImage(%q): %v", name, err)
	}
	dst := filepath.Join(dir, strings.TrimSuffix(strings.TrimSuffix(name, ".img"), ".raw")+".raw")
	raw, err := hasBtrfsMagic(plain)
	if err != nil {
		tb.Fatalf("RestoreFsckImage(%q): %v", name, err)
	}
	if raw {
		if err := os.Rename(plain, dst); err != nil {
			tb.Fatal(err)
		}
		return dst
	}
	RequireProgs(tb)
	mustRun(tb, "btrfs-image", "-r", plain, dst)
	os.Remove(plain)
	return dst
}

// hasBtrfsMagic reports whether path is a raw btrfs image rather than a
// btrfs-image dump.
func hasBtrfsMagic(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	magic := make([]byte, 8)
	if _, err := f.ReadAt(magic, btrfsMagicOffset); err != nil {
		return false, nil // too short for a superblock: a dump
	}
	return bytes.Equal(magic, []byte("_BHRfS_M")), nil
}

// CheckStatus runs the installed `btrfs check --readonly` on a
// single-device image and returns its exit status (0 clean, 1 problems
// found), for tests that compare verdicts rather than require a clean one.
// A status other than 0 or 1, or a failure to run, fails the test.
func CheckStatus(tb testing.TB, img string) int {
	tb.Helper()
	RequireProgs(tb)
	cmd := exec.Command("btrfs", "check", "--readonly", img)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return 1
	}
	tb.Fatalf("btrfs check --readonly %s: %v\n%s", img, err, out)
	return -1
}
