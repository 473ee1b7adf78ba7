//go:build linux

package fuse_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// FS_*_FL bits of linux/fs.h that x/sys/unix does not name.
const (
	fsComprFL     = 0x00000004
	fsImmutableFL = 0x00000010
	fsAppendFL    = 0x00000020
	fsExtentFL    = 0x00080000
	fsNocowFL     = 0x00800000
)

// flagsOf reads a file's inode flags as lsattr does.
func flagsOf(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatalf("FS_IOC_GETFLAGS %s: %v", path, err)
	}
	return fl
}

// setFlags sets a file's inode flags as chattr does.
func setFlags(t *testing.T, path string, fl uint32) error {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(fl))
}

// TestMountFlagsAndStats sets inode flags through the mount (+C on an
// empty file, +c on a directory, +i which then refuses writes), checks
// that the kernel reads the same flags, and reads the hidden counters
// file, which no listing shows.
func TestMountFlagsAndStats(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	m := mountImage(t, img, &fuse.Options{Stats: true}, nil)
	p := func(name string) string { return filepath.Join(m.dir, name) }
	if err := os.WriteFile(p("nocow"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("compressed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("pinned"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, fl := range map[string]uint32{"nocow": fsNocowFL, "compressed": fsComprFL, "pinned": fsImmutableFL} {
		if err := setFlags(t, p(name), fl); err != nil {
			t.Fatalf("chattr %s: %v", name, err)
		}
		if got := flagsOf(t, p(name)); got != fl {
			t.Errorf("%s: flags %#x after setting %#x", name, got, fl)
		}
	}
	if err := os.WriteFile(p("pinned"), []byte("y"), 0o644); err == nil {
		t.Errorf("an immutable file took a write")
	}

	b, err := os.ReadFile(p(".gobtrfs/counters"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Commits int64          `json:"commits"`
		Trees   map[string]any `json:"trees"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Trees == nil {
		t.Errorf("counters: %v\n%s", err, b)
	}
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == ".gobtrfs" {
			t.Errorf("the listing shows the control directory")
		}
	}
	if err := setFlags(t, p("pinned"), 0); err != nil {
		t.Fatal(err)
	}
	if err := setFlags(t, p("pinned"), fsAppendFL); err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	btrfstest.Check(t, []string{img}, true)
	kmnt := btrfstest.Mount(t, "ro", img)
	for name, fl := range map[string]uint32{"nocow": fsNocowFL, "compressed": fsComprFL, "pinned": fsAppendFL} {
		if got := flagsOf(t, filepath.Join(kmnt, name)); got&^fsExtentFL != fl {
			t.Errorf("%s on the kernel's mount: flags %#x, want %#x", name, got, fl)
		}
	}
}

// TestMountNoDataCow mounts with nodatacow: new files get NODATACOW (and
// NODATASUM), as on the kernel's mount with that option, and the image
// passes btrfs check with their data written.
func TestMountNoDataCow(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	_, mo, err := fuse.ParseOptions("nodatacow")
	if err != nil {
		t.Fatal(err)
	}
	m := mountImage(t, img, mo, nil)
	if err := os.WriteFile(filepath.Join(m.dir, "f"), make([]byte, 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := flagsOf(t, filepath.Join(m.dir, "f")); got != fsNocowFL {
		t.Errorf("a new file under nodatacow: flags %#x, want %#x", got, fsNocowFL)
	}
	m.unmount(t)
	btrfstest.Check(t, []string{img}, true)
}
