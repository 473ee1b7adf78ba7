package btrfs_test

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
)

// inodeNoDataCow is the NODATACOW inode flag (btrfs format: 1<<1).
const inodeNoDataCow = 1 << 1

// TestCreateInheritFrom makes files in one directory on behalf of others
// (CreateOptions.InheritFrom, the FUSE mount's O_TMPFILE): each takes the
// named directory's set-group-ID group, default ACL and NOCOW flag, never
// those of the directory it is made in; a name that is not a directory is
// refused and changes nothing. The kernel's view of the same inheritance
// is compared in the fuse package (TestMountACLInherit).
func TestCreateInheritFrom(t *testing.T) {
	img := formatTemp(t, 128<<20)
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.MkdirWith("hidden", 0o700, &btrfs.CreateOptions{Exact: true}))
	must(w.MkdirWith("sgid", 0o777|fs.ModeSetgid, &btrfs.CreateOptions{GID: 3000, Exact: true}))
	must(w.Mkdir("acl", 0o777))
	// u::rw,g::r,o::- as a default ACL (version 2; ACL_USER_OBJ 1,
	// ACL_GROUP_OBJ 4, ACL_OTHER 0x20, id undefined).
	acl := []byte{2, 0, 0, 0,
		1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	must(w.Setxattr("acl", "system.posix_acl_default", acl))
	must(w.Mkdir("nocow", 0o755))
	must(w.SetInodeFlags("nocow", inodeNoDataCow, 0))

	must(w.CreateEmptyWith("hidden/a", 0o666, &btrfs.CreateOptions{UID: 1000, GID: 1000, InheritFrom: "sgid"}))
	must(w.CreateEmptyWith("hidden/b", 0o666, &btrfs.CreateOptions{Umask: 0o022, InheritFrom: "acl"}))
	must(w.CreateEmptyWith("hidden/c", 0o666, &btrfs.CreateOptions{Umask: 0o022, InheritFrom: "nocow"}))
	must(w.CreateEmptyWith("hidden/d", 0o666, &btrfs.CreateOptions{Umask: 0o022}))

	stat := func(name string) *btrfs.Stat {
		t.Helper()
		fi, err := w.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*btrfs.Stat)
	}
	if st := stat("hidden/a"); st.GID != 3000 || st.UID != 1000 {
		t.Errorf("hidden/a owner %d:%d, want 1000:3000 (the set-group-ID directory's group)", st.UID, st.GID)
	}
	// The ACL decides, not the umask: other gets nothing, group r.
	if st := stat("hidden/b"); st.Mode&0o7777 != 0o640 {
		t.Errorf("hidden/b mode %o, want 0640 (the default ACL of acl)", st.Mode&0o7777)
	}
	if _, err := w.Getxattr("hidden/b", "system.posix_acl_default"); err == nil {
		t.Errorf("hidden/b, a file, got a default ACL")
	}
	if fl := stat("hidden/c").Flags; fl&inodeNoDataCow == 0 {
		t.Errorf("hidden/c flags %#x, want NODATACOW from nocow", fl)
	}
	if fl := stat("hidden/d").Flags; fl&inodeNoDataCow != 0 {
		t.Errorf("hidden/d flags %#x, want no NODATACOW (hidden has none)", fl)
	}
	if st := stat("hidden/d"); st.Mode&0o7777 != 0o644 {
		t.Errorf("hidden/d mode %o, want 0644 (umask, no ACL in hidden)", st.Mode&0o7777)
	}

	err = w.CreateEmptyWith("hidden/e", 0o666, &btrfs.CreateOptions{InheritFrom: "hidden/d"})
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("InheritFrom a file: %v, want ENOTDIR", err)
	}
	err = w.CreateEmptyWith("hidden/e", 0o666, &btrfs.CreateOptions{InheritFrom: "missing"})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("InheritFrom a missing directory: %v, want ENOENT", err)
	}
	if _, err := w.Lstat("hidden/e"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused creation made hidden/e: %v", err)
	}
}
