package mkfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestBuildSubvolTypesAndInodeFlags builds with mkfs.btrfs 6.19's
// --subvol TYPE:SUBDIR and --inode-flags: the library sees the read-only
// and default subvolumes and the flags (inherited below the path, not
// into a subvolume below it); the kernel agrees (get-default, property
// ro, lsattr) and btrfs check passes.
func TestBuildSubvolTypesAndInodeFlags(t *testing.T) {
	src := t.TempDir()
	for _, p := range []string{"root/etc/hostname", "root/var/db/data", "root/var/db/sub/inner", "snap/old", "top"} {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("contents of "+p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := BuildOptions{
		Subvols:    []Subvolume{{Path: "root", Default: true}, {Path: "snap", ReadOnly: true}, {Path: "root/var/db/sub"}},
		InodeFlags: []InodeFlags{{Path: "root/var/db", NoDataCow: true}, {Path: "top", NoDataSum: true}},
		Compress:   "zstd", CompressProperty: true,
	}
	img := buildImage(t, dirOpener(src), opts)

	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	flags := func(p string) disk.InodeFlags {
		fi, err := fsys.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return disk.InodeFlags(fi.Sys().(*btrfs.Stat).Flags)
	}
	const cow, sum = disk.InodeNoDataCow, disk.InodeNoDataSum
	for p, want := range map[string]disk.InodeFlags{
		"root/var/db": cow, "root/var/db/data": cow | sum, "root/var": 0, "root/var/db/sub": 0,
		"root/var/db/sub/inner": 0, "top": sum, "snap/old": 0,
	} {
		if got := flags(p) & (cow | sum); got != want {
			t.Errorf("%s: flags %v, want %v", p, got, want)
		}
	}
	if got := flags(".") & disk.InodeCompress; got == 0 {
		t.Errorf("top directory: no COMPRESS flag after --compress")
	}
	if v, err := fsys.Getxattr(".", btrfs.PropCompression); err != nil || string(v) != "zstd" {
		t.Errorf("top directory's %s = %q, %v; want zstd", btrfs.PropCompression, v, err)
	}
	def, err := fsys.DefaultSubvolume()
	if err != nil {
		t.Fatal(err)
	}
	rootID, err := fsys.SubvolumeAt("root")
	if err != nil || def != rootID {
		t.Errorf("default subvolume %d, want root's %d (%v)", def, rootID, err)
	}
	svs, err := fsys.Subvolumes()
	if err != nil {
		t.Fatal(err)
	}
	ro := map[string]bool{}
	for _, sv := range svs {
		ro[sv.Path] = sv.ReadOnly
	}
	if !ro["snap"] || ro["root"] || ro["root/var/db/sub"] || len(svs) != 3 {
		t.Errorf("subvolumes %+v: want snap read-only, root and root/var/db/sub writable", svs)
	}

	btrfstest.Check(t, []string{img}, true)
	if !btrfstest.Interop() && os.Getenv(btrfstest.InteropEnv) != "1" {
		return
	}
	mnt := btrfstest.Mount(t, "ro", img) // mounts the default: root
	if b, err := os.ReadFile(filepath.Join(mnt, "etc/hostname")); err != nil || string(b) != "contents of root/etc/hostname" {
		t.Errorf("default mount shows etc/hostname = %q, %v", b, err)
	}
	btrfstest.Unmount(t, mnt)
	top := btrfstest.Mount(t, "ro,subvolid=5", img)
	out, err := exec.Command("btrfs", "property", "get", "-ts", filepath.Join(top, "snap"), "ro").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ro=true" {
		t.Errorf("property get snap ro: %q, %v", out, err)
	}
	out, err = exec.Command("lsattr", "-d", filepath.Join(top, "root/var/db"), filepath.Join(top, "root/var/db/data")).CombinedOutput()
	if err != nil || strings.Count(string(out), "C") < 2 {
		t.Errorf("lsattr: %s, %v; want C on both", out, err)
	}
}
