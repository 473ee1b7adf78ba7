package btrfs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestWriteLockKernelMount: an image the kernel has mounted refuses a
// writer with ErrMounted and a message naming the mount point, lets a
// reader in, and takes the writer once it is unmounted.
func TestWriteLockKernelMount(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	dir := btrfstest.Mount(t, "", img)

	w, err := btrfs.OpenWritable(img, nil)
	if err == nil {
		w.Close()
		t.Fatal("a writer was let in while the kernel has the image mounted")
	}
	if !errors.Is(err, btrfs.ErrMounted) || errors.Is(err, btrfs.ErrLocked) {
		t.Fatalf("writer of a mounted image: %v; want ErrMounted", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, img+": mounted by the kernel at "+dir+" (through /dev/loop") ||
		!strings.HasSuffix(msg, "; unmount it first") || strings.Count(msg, img) != 1 {
		t.Errorf("message %q should name the image once, the mount point %s and the loop device", msg, dir)
	}

	r, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatalf("reader of a mounted image: %v", err)
	}
	if _, err := r.Stat("."); err != nil {
		t.Error(err)
	}
	r.Close()

	btrfstest.Unmount(t, dir)
	w, err = btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatalf("writer after the unmount: %v", err)
	}
	defer w.Close()
	if err := w.Mkdir("after", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}
