package btrfs_test

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestSetattrInode checks SetattrInode against the path calls it stands
// for (Chown, Chmod, Chtimes): the Stat it returns is what Lstat reads
// afterwards, a change of owner clears the set-id bits and the
// capability before a mode given with it, one time given keeps the
// other, KillSUIDGID clears as a write without CAP_FSETID does (and alone
// changes nothing when there is nothing to clear), it works in a nested
// subvolume, and it refuses what the path calls refuse. btrfs check
// passes afterwards.
func TestSetattrInode(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if fsys != nil {
			fsys.Close()
		}
	}()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	stat := func(name string) *btrfs.Stat {
		t.Helper()
		fi, err := fsys.Lstat(name)
		must(err)
		return fi.Sys().(*btrfs.Stat)
	}
	same := func(what string, got *btrfs.Stat, name string) {
		t.Helper()
		if want := stat(name); *got != *want {
			t.Errorf("%s: returned %+v, Lstat %+v", what, *got, *want)
		}
	}
	keep := btrfs.AttrChange{UID: -1, GID: -1}
	const immutable = 1 << 6 // BTRFS_INODE_IMMUTABLE (chattr +i)

	must(fsys.WriteFile("f", []byte("data"), 0o644))
	must(fsys.Chmod("f", fs.ModeSetuid|fs.ModeSetgid|0o775))
	must(fsys.Setxattr("f", "security.capability", []byte{1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}))
	f := stat("f")

	// Owner and mode in one call: the owner's change clears both set-id
	// bits (the group may execute) and the capability, then the mode is
	// set as given.
	a := keep
	a.UID, a.GID = 1000, 100
	a.SetMode, a.Mode = true, fs.ModeSetgid|0o750
	st, err := fsys.SetattrInode(f.Subvolume, f.Ino, a)
	must(err)
	same("chown+chmod", st, "f")
	if st.UID != 1000 || st.GID != 100 || st.Mode != syscall.S_IFREG|0o2750 {
		t.Errorf("chown+chmod: uid %d gid %d mode %o", st.UID, st.GID, st.Mode)
	}
	if _, err := fsys.Getxattr("f", "security.capability"); err == nil {
		t.Error("chown kept security.capability")
	}
	if !st.Ctime.After(f.Ctime) && !st.Ctime.Equal(f.Ctime) {
		t.Errorf("ctime went back: %v < %v", st.Ctime, f.Ctime)
	}

	// One time keeps the other.
	mt := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	a = keep
	a.Mtime = &mt
	st, err = fsys.SetattrInode(f.Subvolume, f.Ino, a)
	must(err)
	same("mtime", st, "f")
	if !st.Mtime.Equal(mt) || !st.Atime.Equal(f.Atime) {
		t.Errorf("mtime: mtime %v atime %v (was %v)", st.Mtime, st.Atime, f.Atime)
	}
	at := time.Date(2021, 1, 2, 3, 4, 5, 6, time.UTC)
	a = keep
	a.Atime = &at
	st, err = fsys.SetattrInode(f.Subvolume, f.Ino, a)
	must(err)
	if !st.Mtime.Equal(mt) || !st.Atime.Equal(at) {
		t.Errorf("atime: mtime %v atime %v", st.Mtime, st.Atime)
	}

	// KillSUIDGID: the set-group-ID bit stays without group execute.
	must(fsys.Chmod("f", fs.ModeSetuid|fs.ModeSetgid|0o764))
	before := stat("f")
	a = keep
	a.KillSUIDGID = true
	st, err = fsys.SetattrInode(f.Subvolume, f.Ino, a)
	must(err)
	same("kill", st, "f")
	if st.Mode != syscall.S_IFREG|0o2764 {
		t.Errorf("kill: mode %o, want %o", st.Mode, syscall.S_IFREG|0o2764)
	}
	if st.Ctime.Before(before.Ctime) {
		t.Errorf("kill: ctime went back")
	}
	// Nothing left to clear: nothing changes, not even the ctime.
	before = stat("f")
	st, err = fsys.SetattrInode(f.Subvolume, f.Ino, a)
	must(err)
	if *st != *before {
		t.Errorf("kill of nothing changed %+v to %+v", *before, *st)
	}
	// A directory keeps its bits.
	must(fsys.Mkdir("d", fs.ModeSetgid|0o775))
	d := stat("d")
	st, err = fsys.SetattrInode(d.Subvolume, d.Ino, a)
	must(err)
	if st.Mode != syscall.S_IFDIR|0o2775 {
		t.Errorf("kill on a directory: mode %o", st.Mode)
	}

	// A nested subvolume.
	if _, err := fsys.CreateSubvolume("sv", nil); err != nil {
		t.Fatal(err)
	}
	must(fsys.WriteFile("sv/g", []byte("x"), 0o600))
	g := stat("sv/g")
	a = keep
	a.SetMode, a.Mode = true, 0o640
	st, err = fsys.SetattrInode(g.Subvolume, g.Ino, a)
	must(err)
	same("subvolume", st, "sv/g")
	if st.Subvolume == f.Subvolume || st.Mode != syscall.S_IFREG|0o640 {
		t.Errorf("subvolume: %d mode %o", st.Subvolume, st.Mode)
	}

	// Refusals.
	if _, err := fsys.SetattrInode(f.Subvolume, 99999, a); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing inode: %v", err)
	}
	bad := keep
	bad.UID = 1<<32 - 1
	if _, err := fsys.SetattrInode(f.Subvolume, f.Ino, bad); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("uid -1 as 32 bits: %v", err)
	}
	if _, err := fsys.SetattrInode(1, f.Ino, a); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("root tree: %v", err)
	}
	must(fsys.SetInodeFlags("sv/g", immutable, 0))
	if _, err := fsys.SetattrInode(g.Subvolume, g.Ino, a); !errors.Is(err, syscall.EPERM) {
		t.Errorf("immutable: %v", err)
	}
	must(fsys.SetInodeFlags("sv/g", 0, immutable))

	must(fsys.Close())
	fsys = nil
	btrfstest.Check(t, []string{img}, true)
}

// TestCreateStat checks that CreateEmptyStat and MkdirStat return what
// Lstat reads afterwards: in a set-group-ID directory with a default ACL
// (which change the group, the bit and the mode), with an owner and a
// umask, in a nested subvolume; errors change nothing.
func TestCreateStat(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.Mkdir("d", 0o777))
	must(fsys.Chown("d", 0, 3000))
	must(fsys.Chmod("d", fs.ModeSetgid|0o777))
	// A default ACL: user::rwx, group::r-x, other::r-- (the xattr form).
	acl := []byte{2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 5, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff}
	must(fsys.Setxattr("d", "system.posix_acl_default", acl))
	_, err = fsys.CreateSubvolume("sv", nil)
	must(err)
	opts := &btrfs.CreateOptions{UID: 1000, GID: 1000, Umask: 0o027}
	for _, c := range []struct {
		name string
		dir  bool
	}{{"d/f", false}, {"d/sub", true}, {"f", false}, {"sub", true}, {"sv/f", false}, {"sv/sub", true}} {
		var st *btrfs.Stat
		if c.dir {
			st, err = fsys.MkdirStat(c.name, 0o755, opts)
		} else {
			st, err = fsys.CreateEmptyStat(c.name, 0o666, opts)
		}
		must(err)
		fi, err := fsys.Lstat(c.name)
		must(err)
		if want := fi.Sys().(*btrfs.Stat); *st != *want {
			t.Errorf("%s: returned %+v, Lstat %+v", c.name, *st, *want)
		}
	}
	if _, err := fsys.CreateEmptyStat("d/f", 0o644, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("existing name: %v", err)
	}
	if _, err := fsys.MkdirStat("nope/x", 0o755, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing parent: %v", err)
	}
	must(fsys.Close())
	btrfstest.Check(t, []string{img}, true)
}
