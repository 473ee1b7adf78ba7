//go:build linux

package blockdev_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestKernelMountRefusesWriters: an image the kernel has mounted through a
// loop device is refused to every writer with ErrMounted, naming the mount
// point and the loop device, and left untouched; so is the loop device
// itself. Readers are not refused; a loop device that is attached but not
// mounted refuses nothing; after the unmount writers get in.
func TestKernelMountRefusesWriters(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	st0, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}

	loop := btrfstest.Attach(t, img)
	f, err := blockdev.OpenFile(img, false)
	if err != nil {
		t.Fatalf("image attached to %s but not mounted: %v", loop, err)
	}
	f.Close()
	// A block device held by a writer: its O_EXCL claim and its lock
	// refuse a second writer, as locked, not mounted.
	lw, err := blockdev.OpenFile(loop, false)
	if err != nil {
		t.Fatalf("writer of %s: %v", loop, err)
	}
	if f, err := blockdev.OpenFile(loop, false); !errors.Is(err, blockdev.ErrLocked) || errors.Is(err, blockdev.ErrMounted) ||
		!strings.HasPrefix(err.Error(), loop+": image is open for writing elsewhere") {
		if err == nil {
			f.Close()
		}
		t.Errorf("second writer of %s: %v; want ErrLocked", loop, err)
	}
	lw.Close()
	btrfstest.Detach(t, loop)

	dir := btrfstest.Mount(t, "", img)
	opens := map[string]func(string) (*blockdev.File, error){
		"OpenFile":     func(p string) (*blockdev.File, error) { return blockdev.OpenFile(p, false) },
		"OpenFileGrow": func(p string) (*blockdev.File, error) { return blockdev.OpenFileGrow(p, st0.Size()*2) },
		"CreateFile":   func(p string) (*blockdev.File, error) { return blockdev.CreateFile(p, st0.Size()) },
	}
	var through string
	for name, open := range opens {
		f, err := open(img)
		if err == nil {
			f.Close()
			t.Fatalf("%s: a writer was let in while the kernel has %s mounted", name, img)
		}
		be, ok := errors.AsType[*blockdev.BusyError](err)
		if !errors.Is(err, blockdev.ErrMounted) || !ok || be.MountPoint != dir || !strings.HasPrefix(be.Through, "/dev/loop") {
			t.Fatalf("%s: %v; want ErrMounted at %s through a loop device", name, err, dir)
		}
		through = be.Through
		want := img + ": mounted by the kernel at " + dir + " (through " + through + "); unmount it first"
		if err.Error() != want {
			t.Errorf("%s: message\n%q\nwant\n%q", name, err, want)
		}
		if st, err := os.Stat(img); err != nil || st.Size() != st0.Size() {
			t.Fatalf("%s: a refused writer changed the image's size: %v", name, err)
		}
	}
	// Another name of the image (a hard link) is the same file.
	link := img + ".link"
	if err := os.Link(img, link); err != nil {
		t.Fatal(err)
	}
	if f, err := blockdev.OpenFile(link, false); !errors.Is(err, blockdev.ErrMounted) ||
		!strings.HasPrefix(err.Error(), link+": mounted by the kernel at "+dir+" (through "+through+")") {
		if err == nil {
			f.Close()
		}
		t.Errorf("hard link %s of the mounted image: %v; want ErrMounted", link, err)
	}
	if f, err := blockdev.OpenFile(through, false); !errors.Is(err, blockdev.ErrMounted) || !strings.Contains(err.Error(), " at "+dir) {
		if err == nil {
			f.Close()
		}
		t.Errorf("the mounted loop device %s: %v; want ErrMounted at %s", through, err, dir)
	}
	r, err := blockdev.OpenFile(img, true)
	if err != nil {
		t.Fatalf("reader of a mounted image: %v", err)
	}
	if _, _, _, err := blockdev.ReadPrimarySuper(r, false); err != nil {
		t.Errorf("reader of a mounted image: %v", err)
	}
	r.Close()

	btrfstest.Unmount(t, dir)
	f, err = blockdev.OpenFile(img, false)
	if err != nil {
		t.Fatalf("writer after the unmount: %v", err)
	}
	f.Close()
}

// TestKernelMountRefusesEveryDevice: each device of a mounted two-device
// filesystem is refused, also the one the mount does not name as its
// source (found through /sys/fs/btrfs).
func TestKernelMountRefusesEveryDevice(t *testing.T) {
	btrfstest.RequireInterop(t)
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{})
	dir := btrfstest.Mount(t, "", devs...)
	for _, d := range devs {
		f, err := blockdev.OpenFile(d, false)
		if err == nil {
			f.Close()
			t.Fatalf("%s: a writer was let in while the kernel has it mounted", d)
		}
		if !errors.Is(err, blockdev.ErrMounted) || !strings.Contains(err.Error(), " at "+dir+" ") {
			t.Errorf("%s: %v; want ErrMounted at %s", d, err, dir)
		}
	}
	btrfstest.Unmount(t, dir)
	for _, d := range devs {
		f, err := blockdev.OpenFile(d, false)
		if err != nil {
			t.Fatalf("%s: writer after the unmount: %v", d, err)
		}
		f.Close()
	}
}
