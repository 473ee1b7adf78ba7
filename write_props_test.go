package btrfs_test

import (
	"errors"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestPropertyOps sets the label, the default subvolume, a subvolume's
// read-only flag, compression properties and attribute flags, and checks
// them with btrfs check, btrfs-progs and the kernel's mount.
func TestPropertyOps(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Label: "old"})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	id, err := fsys.CreateSubvolume("sv", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		fsys.WriteFile("sv/data", []byte("data"), 0o644),
		fsys.WriteFile("z", nil, 0o644),
		fsys.WriteFile("n", nil, 0o644),
		fsys.WriteFile("c", nil, 0o644),
		fsys.WriteFile("nocow", nil, 0o644),
		fsys.Mkdir("dir", 0o755),
		fsys.SetLabel("new label"),
		fsys.SetDefaultSubvolume(id),
		fsys.SetCompression("z", "zstd"),
		fsys.SetCompression("n", "no"),
		fsys.SetCompression("dir", "lzo"),
		fsys.SetFileAttr("c", btrfs.InodeCompress|btrfs.InodeNoDump),
		fsys.SetFileAttr("nocow", btrfs.InodeNoDataCow|btrfs.InodeAppend),
		fsys.SetSubvolumeReadOnly(id, true),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	// Refusals change nothing.
	for what, err := range map[string]error{
		"bad compression":   fsys.SetCompression("z", "gzip"),
		"both compressions": fsys.SetFileAttr("c", btrfs.InodeCompress|btrfs.InodeNoCompress),
		"unknown flag":      fsys.SetFileAttr("c", btrfs.InodeNoDataSum),
		"write into ro":     fsys.WriteFile("sv/more", nil, 0o644),
		"ro top level":      fsys.SetSubvolumeReadOnly(5, true),
		"missing default":   fsys.SetDefaultSubvolume(999),
		"long label":        fsys.SetLabel(strings.Repeat("x", 256)),
	} {
		if err == nil {
			t.Errorf("%s: no error", what)
		}
	}
	if err := fsys.WriteFile("sv/more", nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write into read-only subvolume: %v, want EROFS", err)
	}
	if err := fsys.SetFileAttr("nocow", btrfs.InodeNoDataCow|btrfs.InodeCompress); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("compress a NODATACOW file: %v, want EINVAL", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)

	r, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Label(); got != "new label" {
		t.Errorf("Label = %q", got)
	}
	if def, err := r.DefaultSubvolume(); err != nil || def != id {
		t.Errorf("DefaultSubvolume = %d, %v; want %d", def, err, id)
	}
	subs, err := r.Subvolumes()
	if err != nil || len(subs) != 1 || !subs[0].ReadOnly {
		t.Errorf("Subvolumes = %+v, %v; want sv read-only", subs, err)
	}
	flags := func(name string) uint64 {
		fi, err := r.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*btrfs.Stat).Flags
	}
	for name, want := range map[string]uint64{
		"z": btrfs.InodeCompress, "n": btrfs.InodeNoCompress, "dir": btrfs.InodeCompress,
		"c":     btrfs.InodeCompress | btrfs.InodeNoDump,
		"nocow": btrfs.InodeNoDataCow | btrfs.InodeNoDataSum | btrfs.InodeAppend,
	} {
		if got := flags(name); got != want {
			t.Errorf("%s: flags %#x, want %#x", name, got, want)
		}
	}
	if v, err := r.Getxattr("c", "btrfs.compression"); err != nil || string(v) != "zlib" {
		t.Errorf("c: btrfs.compression = %q, %v; want zlib (chattr +c's)", v, err)
	}
	if _, err := r.Getxattr("nocow", "btrfs.compression"); err == nil {
		t.Errorf("nocow has a compression property")
	}

	// btrfs-progs reads the label offline; the kernel sees the rest.
	out, err := exec.Command("btrfs", "property", "get", "-t", "device", img, "label").CombinedOutput()
	if err != nil || string(out) != "label=new label\n" {
		t.Errorf("btrfs property get label: %q, %v", out, err)
	}
	mnt := btrfstest.Mount(t, "ro,subvolid=5", img)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"btrfs", "subvolume", "get-default", mnt}, "ID 256 gen "},
		{[]string{"btrfs", "property", "get", mnt + "/sv", "ro"}, "ro=true\n"},
		{[]string{"btrfs", "property", "get", mnt + "/z", "compression"}, "compression=zstd\n"},
		{[]string{"btrfs", "property", "get", mnt + "/dir", "compression"}, "compression=lzo\n"},
		{[]string{"lsattr", mnt + "/c", mnt + "/n", mnt + "/nocow"},
			"------d-c------------- " + mnt + "/c\n" + "---------------------m " + mnt + "/n\n" + "-----a---------C------ " + mnt + "/nocow\n"},
	} {
		out, err := exec.Command(c.args[0], c.args[1:]...).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c.want) {
			t.Errorf("%s: %q, %v; want %q", strings.Join(c.args, " "), out, err, c.want)
		}
	}
	btrfstest.Unmount(t, mnt)
	var pe *fs.PathError
	if err := r.SetLabel("x"); !errors.As(err, &pe) {
		t.Errorf("SetLabel on a read-only FS: %v", err)
	}
}
