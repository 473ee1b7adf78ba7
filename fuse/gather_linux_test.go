//go:build linux

package fuse_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestWriteGather writes small pieces that continue each other through
// the mount and checks, through the library under it, that the daemon
// holds them back (so gathering happens at all), and that each request
// that can see the file's data or size puts them in first: without the
// put, the library still has the old size, a truncate is undone by the
// writes put in after it, a punched hole fills again, a copy misses
// bytes. The timer is an hour here (TestWriteGatherTimer checks it).
// The end state goes through btrfs check and the kernel's mount.
func TestWriteGather(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	m := mountImage(t, img, &fuse.Options{GatherDelay: time.Hour}, nil)
	p := func(name string) string { return filepath.Join(m.dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const bs = 8 << 10
	piece := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, bs) }
	// libSize is the size the filesystem under the mount has.
	libSize := func(name string) int64 {
		t.Helper()
		fi, err := m.fsys.Stat(name)
		must(err)
		return fi.Size()
	}
	libRead := func(name string) []byte {
		t.Helper()
		b, err := m.fsys.ReadFile(name)
		must(err)
		return b
	}
	// write writes pieces [from, to) of name at their places.
	write := func(f *os.File, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := f.WriteAt(piece(i), int64(i)*bs); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(from, to int) []byte {
		var b []byte
		for i := from; i < to; i++ {
			b = append(b, piece(i)...)
		}
		return b
	}
	held := func(step, name string, size int64) {
		t.Helper()
		if got := libSize(name); got != size {
			t.Fatalf("%s: the library has size %d before the request, want %d (the writes gathered)", step, got, size)
		}
	}
	in := func(step, name string, size int64) {
		t.Helper()
		if got := libSize(name); got != size {
			t.Errorf("%s: the library has size %d after the request, want %d", step, got, size)
		}
	}

	f, err := os.OpenFile(p("a"), os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	defer f.Close()

	// stat that asks the daemon (statx with AT_STATX_FORCE_SYNC).
	write(f, 0, 3)
	held("stat", "a", 0)
	var stx unix.Statx_t
	must(unix.Statx(unix.AT_FDCWD, p("a"), unix.AT_STATX_FORCE_SYNC, unix.STATX_SIZE, &stx))
	if stx.Size != 3*bs {
		t.Errorf("statx size %d, want %d", stx.Size, 3*bs)
	}
	in("stat", "a", 3*bs)

	// fsync.
	write(f, 3, 5)
	held("fsync", "a", 3*bs)
	must(f.Sync())
	in("fsync", "a", 5*bs)

	// Writes need not continue each other; a large one puts them in
	// and goes in as it is.
	write(f, 5, 6)
	write(f, 7, 8)
	held("large write", "a", 5*bs)
	big := bytes.Repeat([]byte("B"), 256<<10)
	_, err = f.WriteAt(big, 1<<20)
	must(err)
	in("large write", "a", 1<<20+256<<10)

	// A write over a gathered piece puts the gathered ones in first:
	// the later bytes win.
	write(f, 8, 9)
	_, err = f.WriteAt(bytes.Repeat([]byte("O"), bs), 8*bs)
	must(err)
	if b := libRead("a"); !bytes.Equal(b[8*bs:9*bs], piece(8)) {
		t.Errorf("overlapping write: the first one did not go in before it")
	}

	// ftruncate after gathered writes past the new size: the writes
	// go in first, then the truncate.
	write(f, 8, 12)
	held("truncate", "a", 1<<20+256<<10)
	must(f.Truncate(10 * bs))
	in("truncate", "a", 10*bs)

	// lseek SEEK_HOLE sees the gathered end.
	write(f, 10, 13)
	held("lseek", "a", 10*bs)
	// (Piece 6 was never written: a hole.)
	off, err := unix.Seek(int(f.Fd()), 7*bs, unix.SEEK_HOLE)
	must(err)
	if off != 13*bs {
		t.Errorf("SEEK_HOLE from piece 7 gave %d, want %d", off, 13*bs)
	}
	in("lseek", "a", 13*bs)

	// fallocate PUNCH_HOLE over gathered bytes.
	write(f, 13, 16)
	held("punch", "a", 13*bs)
	must(unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 14*bs, bs))
	got := libRead("a")
	if len(got) != 16*bs || !bytes.Equal(got[14*bs:15*bs], make([]byte, bs)) || !bytes.Equal(got[15*bs:], piece(15)) {
		t.Errorf("punch over gathered writes: size %d, the hole or the bytes after it wrong", len(got))
	}

	// copy_file_range out of a file with gathered writes.
	write(f, 16, 18)
	held("copy", "a", 16*bs)
	g, err := os.OpenFile(p("b"), os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	write(g, 0, 2) // gathered in b too: the copy lands over them
	inOff, outOff := int64(16*bs), int64(0)
	if n, err := unix.CopyFileRange(int(f.Fd()), &inOff, int(g.Fd()), &outOff, 2*bs, 0); err != nil || n != 2*bs {
		t.Errorf("copy_file_range: %d, %v", n, err)
	}
	// An unaligned copy (a copy, not a clone) over gathered bytes of b.
	write(g, 2, 3)
	inOff, outOff = 16*bs, 2*bs+1
	if n, err := unix.CopyFileRange(int(f.Fd()), &inOff, int(g.Fd()), &outOff, 100, 0); err != nil || n != 100 {
		t.Errorf("unaligned copy_file_range: %d, %v", n, err)
	}
	must(g.Close())
	wantB := append(want(16, 18), piece(2)...)
	copy(wantB[2*bs+1:], piece(16)[:100])
	if b := libRead("b"); !bytes.Equal(b, wantB) {
		t.Errorf("copy of gathered bytes: %d bytes, not the ones written", len(b))
	}

	// Listing the directory (READDIRPLUS hands out sizes), lookup
	// and statfs put every inode's writes in.
	write(f, 18, 19)
	held("readdir", "a", 18*bs)
	_, err = os.ReadDir(m.dir)
	must(err)
	in("readdir", "a", 19*bs)
	write(f, 19, 20)
	held("statfs", "a", 19*bs)
	var sfs unix.Statfs_t
	must(unix.Statfs(m.dir, &sfs))
	in("statfs", "a", 20*bs)
	write(f, 20, 21)
	held("link", "a", 20*bs)
	must(os.Link(p("a"), p("a2")))
	in("link", "a", 21*bs)

	// close (FLUSH) of another descriptor of the same file.
	f2, err := os.OpenFile(p("a"), os.O_RDWR, 0)
	must(err)
	write(f2, 21, 22)
	held("close", "a", 21*bs)
	must(f2.Close())
	in("close", "a", 22*bs)

	// And close of the last one, of writes that came in reverse order.
	write(f, 23, 24)
	write(f, 22, 23)
	held("last close", "a", 22*bs)
	must(f.Close())
	in("last close", "a", 24*bs)

	// Gathered writes of an O_TMPFILE-like orphan: written, name
	// removed, then read back through the descriptor.
	h, err := os.OpenFile(p("gone"), os.O_RDWR|os.O_CREATE, 0o644)
	must(err)
	write(h, 0, 4)
	must(os.Remove(p("gone")))
	back := make([]byte, 4*bs)
	if _, err := h.ReadAt(back, 0); err != nil || !bytes.Equal(back, want(0, 4)) {
		t.Errorf("read back of a removed file's gathered writes: %v", err)
	}
	must(h.Close())

	wantTree, err := btrfstest.Scan(m.dir)
	must(err)
	m.unmount(t)
	btrfstest.Check(t, []string{img}, true)
	kmnt := btrfstest.Mount(t, "ro", img)
	kgot, err := btrfstest.Scan(kmnt)
	must(err)
	diff(t, wantTree, kgot, btrfstest.DiffOptions{IgnoreXattr: ignoreBtrfsXattrs, CompareNlink: true})
	kb, err := os.ReadFile(filepath.Join(kmnt, "a"))
	must(err)
	wa := want(0, 24)
	copy(wa[6*bs:7*bs], make([]byte, bs))   // never written
	copy(wa[14*bs:15*bs], make([]byte, bs)) // punched
	if !bytes.Equal(kb, wa) {
		t.Errorf("the kernel reads %d bytes of a, not what was written", len(kb))
	}
}

// TestWriteGatherTimer checks that gathered writes go in on their own
// after GatherDelay, with no other request.
func TestWriteGatherTimer(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	m := mountImage(t, img, &fuse.Options{GatherDelay: 200 * time.Millisecond}, nil)
	f, err := os.Create(filepath.Join(m.dir, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		fi, err := m.fsys.Stat("t")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() == 4096 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("gathered write still held back after 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("the write went in after %v, before the delay (not gathered?)", d)
	}
}

// TestWriteGatherLowSpace checks that nothing is gathered while the
// filesystem is nearly full, so write(2) itself hears ENOSPC.
func TestWriteGatherLowSpace(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Fill it, then free 8 MiB: less than the 32 MiB gathering needs
	// are left for data.
	if err := fsys.WriteFile("fill", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	var size int64
	for {
		if _, err := fsys.WriteAt("fill", chunk, size); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
		size += int64(len(chunk))
		if err := fsys.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Truncate("fill", size-8<<20); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	m := mountImage(t, img, &fuse.Options{GatherDelay: time.Hour}, nil)
	f, err := os.Create(filepath.Join(m.dir, "small"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if fi, err := m.fsys.Stat("small"); err != nil || fi.Size() != 4096 {
		t.Errorf("a write with little space left was held back: %v", err)
	}
}
