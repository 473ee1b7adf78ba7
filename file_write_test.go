package btrfs_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestFileWriteByInode writes through open Files: the writes follow the
// inode across a rename and a new file at the old name, Truncate and Sync
// work on the handle, a removed file fails with ErrNotExist, and read-only
// opens refuse. The kernel then reads what the model says.
func TestFileWriteByInode(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.WriteFile("a", []byte("first"), 0o644))
	f, err := fsys.OpenFile("a")
	must(err)
	must(fsys.Rename("a", "b"))
	must(fsys.WriteFile("a", []byte("new file at the old name"), 0o644))
	if n, err := f.WriteAt([]byte("FIRST, longer now"), 0); err != nil || n != 17 {
		t.Fatalf("WriteAt: %d %v", n, err)
	}
	must(f.Sync())
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640000 bytes: regular extents
	if _, err := f.WriteAt(big, 1<<20); err != nil {
		t.Fatal(err)
	}
	must(f.Truncate(1<<20 + 100))
	want := make([]byte, 1<<20+100)
	copy(want, "FIRST, longer now")
	copy(want[1<<20:], big[:100])
	got := make([]byte, len(want)+10)
	if n, _ := f.ReadAt(got, 0); n != len(want) || !bytes.Equal(got[:n], want) {
		t.Errorf("read through the handle: %d bytes", n)
	}
	if b, err := fsys.ReadFile("a"); err != nil || string(b) != "new file at the old name" {
		t.Errorf("a: %q %v", b, err)
	}

	g, err := fsys.OpenFile("a")
	must(err)
	must(fsys.Remove("a"))
	if _, err := g.WriteAt([]byte("x"), 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteAt to a removed file: %v", err)
	}
	d, err := fsys.OpenFile(".")
	must(err)
	if _, err := d.WriteAt([]byte("x"), 0); err == nil {
		t.Error("WriteAt to a directory succeeded")
	}
	must(fsys.Close())
	btrfstest.Check(t, []string{img}, true)

	ro, err := btrfs.Open(img, nil)
	must(err)
	rf, err := ro.OpenFile("b")
	must(err)
	if _, err := rf.WriteAt([]byte("x"), 0); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("WriteAt on a read-only open: %v", err)
	}
	ro.Close()

	dir := btrfstest.Mount(t, "ro", img)
	if b, err := os.ReadFile(filepath.Join(dir, "b")); err != nil || !bytes.Equal(b, want) {
		t.Errorf("the kernel reads b: %d bytes, %v", len(b), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the kernel sees a: %v", err)
	}
	btrfstest.Unmount(t, dir)
}

// TestFileWritePrepared: File.WriteAt checksums and compresses whole
// sectors before it takes the FS lock, under the policy the file's last
// write met. Writes of every shape (aligned, unaligned, after the file
// became NOCOMPRESS, so the guessed policy is stale) must land as written:
// btrfs check with data checksums and the kernel's read agree.
func TestFileWritePrepared(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1, Compress: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.WriteFile("f", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile("f")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 0, 1<<20)
	put := func(p []byte, off int) {
		t.Helper()
		if n, err := f.WriteAt(p, int64(off)); err != nil || n != len(p) {
			t.Fatalf("WriteAt %d bytes at %d: %d, %v", len(p), off, n, err)
		}
		if end := off + len(p); end > len(want) {
			want = want[:end]
		}
		copy(want[off:], p)
	}
	text := bytes.Repeat([]byte("compressible text, many times over. "), 2000) // 72000 bytes
	put(text[:8192], 0)                                                        // the first write learns the policy
	put(text[:65536], 8192)                                                    // prepared outside the lock, compressed
	put(text[:5000], 70000)                                                    // unaligned: done under the lock
	put(text[:16384], 73728)                                                   // aligned again
	const noCompress = 1 << 3                                                  // the btrfs inode flag NOCOMPRESS
	if err := fsys.SetInodeFlags("f", noCompress, 0); err != nil {
		t.Fatal(err)
	}
	put(text[:32768], 90112) // the guessed policy is stale: the write redoes it
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	dir := btrfstest.Mount(t, "ro", img)
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || !bytes.Equal(b, want) {
		t.Errorf("the kernel reads f: %d bytes (want %d), %v", len(b), len(want), err)
	}
	btrfstest.Unmount(t, dir)
}

// TestFileWriteAtMany writes pieces out of order, overlapping, unaligned
// and past the end in one change, checks the file against the pieces
// applied in order, that a refusal (append-only, a piece not at the end)
// changes nothing, and then btrfs check with data checksums and the
// kernel's read of the file.
func TestFileWriteAtMany(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.WriteFile("f", []byte("start"), 0o644))
	f, err := fsys.OpenFile("f")
	must(err)
	piece := func(off int64, n int, c byte) btrfs.WritePiece {
		return btrfs.WritePiece{Off: off, Data: bytes.Repeat([]byte{c}, n)}
	}
	pieces := []btrfs.WritePiece{
		piece(16384, 8192, 'c'), piece(0, 8192, 'a'), piece(8192, 8192, 'b'),
		piece(100000, 3000, 'u'), piece(4000, 1000, 'o'), piece(1<<20, 4096, 'z'),
	}
	want := []byte("start")
	for _, pc := range pieces {
		if end := int(pc.Off) + len(pc.Data); end > len(want) {
			want = append(want, make([]byte, end-len(want))...)
		}
		copy(want[pc.Off:], pc.Data)
	}
	c0, err := fsys.WriteCounters()
	must(err)
	must(f.WriteAtMany(pieces))
	c1, err := fsys.WriteCounters()
	must(err)
	if n := c1.Changes - c0.Changes; n != 1 {
		t.Errorf("WriteAtMany made %d changes, want 1", n)
	}
	if got, err := fsys.ReadFile("f"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after WriteAtMany: %d bytes, %v; not the pieces applied in order", len(got), err)
	}

	// Append-only: the first piece at the end would do, the second not;
	// nothing is written.
	must(fsys.SetFileAttr("f", btrfs.InodeAppend))
	err = f.WriteAtMany([]btrfs.WritePiece{piece(int64(len(want)), 10, 'x'), piece(0, 10, 'y')})
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("WriteAtMany with a piece before the end of an append-only file: %v", err)
	}
	must(f.WriteAtMany([]btrfs.WritePiece{piece(int64(len(want)), 10, 'x'), piece(int64(len(want))+10, 10, 'y')}))
	want = append(want, bytes.Repeat([]byte("x"), 10)...)
	want = append(want, bytes.Repeat([]byte("y"), 10)...)
	if got, err := fsys.ReadFile("f"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the refusal and the appends: %d bytes, %v", len(got), err)
	}
	must(fsys.SetFileAttr("f", 0))
	if err := f.WriteAtMany([]btrfs.WritePiece{{Off: -1, Data: []byte("x")}}); err == nil {
		t.Error("WriteAtMany at a negative offset succeeded")
	}
	must(fsys.Close())
	btrfstest.Check(t, []string{img}, true)
	kmnt := btrfstest.Mount(t, "ro", img)
	if got, err := os.ReadFile(filepath.Join(kmnt, "f")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the kernel reads %d bytes, not what was written: %v", len(got), err)
	}
}
