package btrfs_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// imageHash is the SHA-256 of the whole image file.
func imageHash(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// TestWriteNoSpace fills a small image with metadata until no chunk can be
// added: the failing change reports ENOSPC, the FS takes no more changes,
// and the image is byte for byte what the last commit left, which btrfs
// check and the kernel accept.
func TestWriteNoSpace(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	value := make([]byte, 3800) // one xattr per 4K leaf
	committed, last := 0, imageHash(t, img)
	var failure error
	for i := 0; failure == nil; i++ {
		if i > 200000 {
			t.Fatal("no ENOSPC after 200000 files on a 128 MiB image")
		}
		name := fmt.Sprintf("f%06d", i)
		if failure = fsys.CreateEmpty(name, 0o644); failure != nil {
			break
		}
		if failure = fsys.Setxattr(name, "user.fill", value); failure != nil {
			break
		}
		if i%2500 == 2499 {
			if failure = fsys.Commit(); failure != nil {
				break
			}
			committed, last = i+1, imageHash(t, img)
		}
	}
	t.Logf("no space after %d committed files: %v", committed, failure)
	if !errors.Is(failure, syscall.ENOSPC) {
		t.Fatalf("failure is not ENOSPC: %v", failure)
	}
	if err := fsys.Mkdir("after", 0o755); !errors.Is(err, btrfs.ErrAborted) {
		t.Errorf("change after the abort: %v, want ErrAborted", err)
	}
	if err := fsys.Commit(); !errors.Is(err, btrfs.ErrAborted) {
		t.Errorf("commit after the abort: %v, want ErrAborted", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if imageHash(t, img) != last {
		t.Fatal("image changed since the last commit")
	}
	if committed == 0 {
		t.Fatal("the image filled before the first commit: make the commits more frequent")
	}
	btrfstest.Check(t, []string{img}, false)
	dir := btrfstest.Mount(t, "ro", img)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != committed {
		t.Errorf("kernel sees %d files, %d were committed", len(ents), committed)
	}
}

// TestWriteDataNoSpace asks for more data space than a small image has:
// the request is refused with ENOSPC before anything changes, and the FS
// keeps working (the transaction is not aborted).
func TestWriteDataNoSpace(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.WriteFile("a", []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Fallocate("a", 0, 1<<40, false); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("fallocate 1 TiB: %v, want ENOSPC", err)
	}
	if err := fsys.WriteFile("big", make([]byte, 200<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write 200 MiB: %v, want ENOSPC", err)
	}
	if _, err := fsys.WriteAt("a", make([]byte, 200<<20), 4096); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write 200 MiB at 4096: %v, want ENOSPC", err)
	}
	// Still working: a reasonable write and a commit.
	if err := fsys.WriteFile("small", []byte("fits"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	fsys.Close()
	btrfstest.Check(t, []string{img}, true)
	dir := btrfstest.Mount(t, "ro", img)
	for name, want := range map[string]string{"a": "kept", "small": "fits"} {
		if b, err := os.ReadFile(dir + "/" + name); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if _, err := os.Stat(dir + "/big"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("big exists after ENOSPC: %v", err)
	}
}

// TestWriteOverPinnedSpace rewrites a file that holds more than half of a
// small image's data space, with no commit on the way: the old extents
// stay pinned until a commit is durable, so the rewrite runs out of space
// half way. As the kernel commits to free pinned space before it says
// ENOSPC, the change that finds no room commits and tries again, and the
// rewrite succeeds.
func TestWriteOverPinnedSpace(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1, DirtyLimit: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	const size, piece = 40 << 20, 1 << 20
	write := func(fill byte) {
		t.Helper()
		f, err := fsys.OpenFile("big")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		p := make([]byte, piece)
		for off := 0; off < size; off += piece {
			for i := range p {
				p[i] = fill + byte(off/piece)
			}
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatalf("write %#x at %d: %v", fill, off, err)
			}
		}
	}
	if err := fsys.CreateEmpty("big", 0o644); err != nil {
		t.Fatal(err)
	}
	write(1)
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	before, _ := fsys.WriteCounters()
	write(100)
	after, _ := fsys.WriteCounters()
	if after.Commits == before.Commits {
		t.Error("the rewrite fit without a commit: make the file larger")
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	dir := btrfstest.Mount(t, "ro", img)
	b, err := os.ReadFile(dir + "/big")
	if err != nil || len(b) != size {
		t.Fatalf("kernel reads %d bytes, %v", len(b), err)
	}
	for off := 0; off < size; off += piece {
		if b[off] != 100+byte(off/piece) || b[off+piece-1] != 100+byte(off/piece) {
			t.Fatalf("kernel reads %#x at %d", b[off], off)
		}
	}
}
