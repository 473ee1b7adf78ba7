package btrfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestOps2NodeMode pins the device-number conversion of Mknod: the
// user-space dev_t in, the kernel's (major << 20) | minor stored.
func TestOps2NodeMode(t *testing.T) {
	mkdev := func(major, minor uint64) uint64 {
		return minor&0xff | (major&0xfff)<<8 | (minor&^0xff)<<12 | (major&^0xfff)<<32
	}
	cases := []struct {
		mode      fs.FileMode
		dev       uint64
		wantMode  uint32
		wantRdev  uint64
		wantError error
	}{
		{fs.ModeDevice | fs.ModeCharDevice | 0o600, mkdev(1, 3), disk.ModeCharDev | 0o600, 0x100003, nil},
		{fs.ModeDevice | 0o660, mkdev(300, 400), disk.ModeBlockDev | 0o660, 300<<20 | 400, nil},
		{fs.ModeDevice | 0o660, mkdev(4095, 0xfffff), disk.ModeBlockDev | 0o660, 4095<<20 | 0xfffff, nil},
		{fs.ModeNamedPipe | 0o644 | fs.ModeSetuid, mkdev(5, 5), disk.ModeFIFO | 0o4644, 0, nil},
		{fs.ModeSocket | 0o755, 0, disk.ModeSocket | 0o755, 0, nil},
		{fs.ModeDevice, mkdev(4096, 0), 0, 0, syscall.EINVAL},
		{fs.ModeDevice, mkdev(0, 0x100000), 0, 0, syscall.EINVAL},
		{0o644, 0, 0, 0, syscall.EINVAL},
		{fs.ModeDir | 0o755, 0, 0, 0, syscall.EINVAL},
		{fs.ModeSymlink | 0o777, 0, 0, 0, syscall.EINVAL},
		{fs.ModeCharDevice, 0, 0, 0, syscall.EINVAL},
		{fs.ModeIrregular, 0, 0, 0, syscall.EINVAL},
	}
	for _, c := range cases {
		mode, rdev, err := nodeMode(c.mode, c.dev)
		if !errors.Is(err, c.wantError) || (err == nil) != (c.wantError == nil) {
			t.Errorf("nodeMode(%v, %#x): error %v, want %v", c.mode, c.dev, err, c.wantError)
			continue
		}
		if err == nil && (mode != c.wantMode || rdev != c.wantRdev) {
			t.Errorf("nodeMode(%v, %#x) = %o %#x, want %o %#x", c.mode, c.dev, mode, rdev, c.wantMode, c.wantRdev)
		}
	}
}

// TestOps2LinkMax gives a file 65535 links (by writing nlink directly)
// and checks that Link refuses one more with EMLINK, changing nothing.
func TestOps2LinkMax(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096})
	fsys, err := OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.CreateEmpty("f", 0o644); err != nil {
		t.Fatal(err)
	}
	setNlink := func(n uint32) {
		t.Helper()
		err := fsys.change("test", "f", func(c *wctx) (bool, error) {
			in, err := c.resolve("f")
			if err != nil {
				return false, err
			}
			in.item.NLink = n
			return true, c.putInode(in)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setNlink(linkMax - 1)
	if err := fsys.Link("f", "g"); err != nil {
		t.Fatalf("link number 65535: %v", err)
	}
	err = fsys.Link("f", "h")
	var le *os.LinkError
	if !errors.As(err, &le) || !errors.Is(err, syscall.EMLINK) {
		t.Fatalf("link past 65535: %v, want *os.LinkError EMLINK", err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Lstat("h"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("h after the refused link: %v", err)
	}
	fi, err := fsys.Lstat("g")
	if err != nil {
		t.Fatal(err)
	}
	if n := fi.Sys().(*Stat).Nlink; n != linkMax {
		t.Errorf("nlink %d, want %d", n, linkMax)
	}
}
