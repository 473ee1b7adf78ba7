package blockdev_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestWriterLock: a file open for writing refuses every other writing
// open (OpenFile, OpenFileGrow, CreateFile) with ErrLocked and leaves the
// file as it was, while read-only opens work; Close lets the next writer
// in.
func TestWriterLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	w, err := blockdev.CreateFile(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	mark := []byte("first writer")
	if _, err := w.WriteAt(mark, 4096); err != nil {
		t.Fatal(err)
	}

	opens := map[string]func() (*blockdev.File, error){
		"OpenFile":     func() (*blockdev.File, error) { return blockdev.OpenFile(path, false) },
		"OpenFileGrow": func() (*blockdev.File, error) { return blockdev.OpenFileGrow(path, 2<<20) },
		"CreateFile":   func() (*blockdev.File, error) { return blockdev.CreateFile(path, 3<<20) },
	}
	for name, open := range opens {
		f, err := open()
		if err == nil {
			f.Close()
			t.Fatalf("%s: a second writer was let in", name)
		}
		var be *blockdev.BusyError
		if !errors.Is(err, blockdev.ErrLocked) || errors.Is(err, blockdev.ErrMounted) || !errors.As(err, &be) || be.Path != path {
			t.Fatalf("%s: %v; want a BusyError for %s matching ErrLocked", name, err, path)
		}
		if !strings.HasPrefix(err.Error(), path+": image is open for writing elsewhere") {
			t.Errorf("%s: message %q", name, err)
		}
		// Refused means untouched: not truncated, not extended.
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1<<20 || !bytes.Equal(got[4096:4096+len(mark)], mark) {
			t.Fatalf("%s: a refused writer changed the file (%d bytes)", name, len(got))
		}
	}

	r, err := blockdev.OpenFile(path, true)
	if err != nil {
		t.Fatalf("reader while a writer is open: %v", err)
	}
	got := make([]byte, len(mark))
	if _, err := r.ReadAt(got, 4096); err != nil || !bytes.Equal(got, mark) {
		t.Fatalf("reader: %q %v", got, err)
	}
	r.Close()

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := blockdev.OpenFileGrow(path, 2<<20)
	if err != nil {
		t.Fatalf("writer after Close: %v", err)
	}
	if g.Size() != 2<<20 {
		t.Errorf("OpenFileGrow: size %d, want %d", g.Size(), 2<<20)
	}
	g.Close()
	g, err = blockdev.OpenFileGrow(path, 1<<20) // longer already: left alone
	if err != nil {
		t.Fatal(err)
	}
	if g.Size() != 2<<20 {
		t.Errorf("OpenFileGrow to a smaller size: size %d, want %d", g.Size(), 2<<20)
	}
	g.Close()
}

// TestWriterLockEveryDevice: a writable scan locks every device of the
// set, not only the first; a file named twice is opened once.
func TestWriterLockEveryDevice(t *testing.T) {
	dir := t.TempDir()
	fsid := disk.UUID{1, 2, 3}
	var paths []string
	for i, dev := range []disk.UUID{{7}, {8}} {
		p := filepath.Join(dir, "dev"+string(rune('1'+i)))
		f, err := blockdev.CreateFile(p, 2<<20)
		if err != nil {
			t.Fatal(err)
		}
		testSuper{fsid: fsid, devid: disk.DevID(i + 1), dev: dev, gen: 9, csum: disk.CsumCRC32C}.writeSupers(t, f)
		f.Close()
		paths = append(paths, p)
	}
	set, err := blockdev.ScanWith([]string{paths[0], paths[1], paths[1]}, blockdev.ScanOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	if len(set.Members) != 2 || len(set.Warnings) != 1 || !strings.Contains(set.Warnings[0], "same file as") {
		t.Fatalf("members %d, warnings %q", len(set.Members), set.Warnings)
	}
	for _, p := range paths {
		if f, err := blockdev.OpenFile(p, false); !errors.Is(err, blockdev.ErrLocked) {
			if err == nil {
				f.Close()
			}
			t.Errorf("%s: second writer: %v; want ErrLocked", p, err)
		}
	}
	if _, err := blockdev.ScanWith(paths, blockdev.ScanOptions{Writable: true}); !errors.Is(err, blockdev.ErrLocked) ||
		strings.Count(err.Error(), paths[0]) != 1 {
		t.Errorf("second writable scan: %v; want ErrLocked naming %s once", err, paths[0])
	}
	ro, err := blockdev.ScanWith(paths, blockdev.ScanOptions{})
	if err != nil {
		t.Fatalf("read-only scan while a writer is open: %v", err)
	}
	ro.Close()
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
	set, err = blockdev.ScanWith(paths, blockdev.ScanOptions{Writable: true})
	if err != nil {
		t.Fatalf("writable scan after Close: %v", err)
	}
	set.Close()
}

// TestBusyErrorMessage: what the message says for each thing that holds a
// device, and what it matches.
func TestBusyErrorMessage(t *testing.T) {
	for _, c := range []struct {
		e    *blockdev.BusyError
		want string
		is   []error
	}{
		{&blockdev.BusyError{Path: "disk.img", Kind: blockdev.ErrMounted, MountPoint: "/mnt/x", Through: "/dev/loop3"},
			"disk.img: mounted by the kernel at /mnt/x (through /dev/loop3); unmount it first", []error{blockdev.ErrMounted}},
		{&blockdev.BusyError{Path: "/dev/sdb", Kind: blockdev.ErrMounted, MountPoint: "/mnt/x", Cause: syscall.EBUSY},
			"/dev/sdb: mounted by the kernel at /mnt/x; unmount it first", []error{blockdev.ErrMounted, syscall.EBUSY}},
		{&blockdev.BusyError{Path: "disk.img", Kind: blockdev.ErrMounted, Through: "/dev/loop3"},
			"disk.img: mounted by the kernel (through /dev/loop3; the mount point is not visible from here); unmount it first", []error{blockdev.ErrMounted}},
		{&blockdev.BusyError{Path: "disk.img", Kind: blockdev.ErrLocked},
			"disk.img: image is open for writing elsewhere (another writer, in this or another process, holds its lock); close that writer first", []error{blockdev.ErrLocked}},
		{&blockdev.BusyError{Path: "/dev/sdb", Kind: blockdev.ErrLocked, Cause: syscall.EBUSY},
			"/dev/sdb: image is open for writing elsewhere (the device is opened exclusively by another writer, in this or another process, or claimed by the kernel: " + syscall.EBUSY.Error() + ")", []error{blockdev.ErrLocked, syscall.EBUSY}},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
		for _, target := range c.is {
			if !errors.Is(c.e, target) {
				t.Errorf("%q does not match %v", c.want, target)
			}
		}
	}
}
