//go:build linux

package fuse_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// ignoreBtrfsXattrs drops the btrfs.* attributes (compression, the
// kernel's own), which the kernel shows and gobtrfs does not.
func ignoreBtrfsXattrs(n string) bool { return strings.HasPrefix(n, "btrfs.") }

// diff reports every difference of got from want, at most 50.
func diff(t *testing.T, want, got *btrfstest.Tree, opts btrfstest.DiffOptions) {
	t.Helper()
	for i, d := range btrfstest.Diff(want, got, opts) {
		if i == 50 {
			t.Errorf("... more differences")
			break
		}
		t.Error(d)
	}
}

// inodes maps every path of a scan in the mount's own subvolume to its
// inode number.
func inodes(t *testing.T, root string) map[string]uint64 {
	t.Helper()
	var rootSt syscall.Stat_t
	if err := syscall.Lstat(root, &rootSt); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Dev != rootSt.Dev {
			return fs.SkipDir // another subvolume on the kernel's mount
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = st.Ino
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMountReadOnly fills an image through the kernel with every kind of
// content the read path knows (files with holes and shared extents,
// compressed data, special files, hard links, xattrs and ACLs, odd names,
// modes, nested subvolumes and snapshots), then mounts it read-only with
// our FUSE and compares what both show: types, modes, owners, sizes,
// times, contents, holes, targets, devices, xattrs, hard links, and the
// inode numbers of the top-level subvolume. Changes are refused (EROFS).
func TestMountReadOnly(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	kmnt := btrfstest.Mount(t, "", img)
	btrfstest.PopulateAll(t, kmnt, 7, btrfstest.PopulateOptions{})
	btrfstest.Unmount(t, kmnt)
	kmnt = btrfstest.Mount(t, "ro", img)
	want, err := btrfstest.Scan(kmnt)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Entries) < 100 {
		t.Fatalf("the kernel shows only %d entries: populating failed", len(want.Entries))
	}
	wantIno := inodes(t, kmnt)
	btrfstest.Unmount(t, kmnt)

	m := mountImage(t, img, &fuse.Options{ReadOnly: true}, nil)
	got, err := btrfstest.Scan(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, want, got, btrfstest.DiffOptions{IgnoreXattr: ignoreBtrfsXattrs})
	gotIno := inodes(t, m.dir)
	for p, ino := range wantIno {
		if gotIno[p] != ino {
			t.Errorf("%s: inode %d on our mount, %d on the kernel's", p, gotIno[p], ino)
		}
	}
	_, oerr := syscall.Open(filepath.Join(m.dir, "x"), syscall.O_CREAT|syscall.O_WRONLY, 0o644)
	for _, err := range []error{
		syscall.Mkdir(filepath.Join(m.dir, "new"), 0o755),
		syscall.Unlink(filepath.Join(m.dir, "files", "empty")),
		oerr,
	} {
		if err != syscall.EROFS {
			t.Errorf("a change on a read-only mount: got %v, want EROFS", err)
		}
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(m.dir, &sfs); err != nil || sfs.Blocks == 0 || sfs.Bfree == 0 || sfs.Bfree > sfs.Blocks {
		t.Errorf("statfs: %+v, %v", sfs, err)
	}
}

// TestMountReadWrite fills an empty image through our mount with what
// programs make (files with holes, fallocated ranges and clones where
// FUSE passes them, special files, hard links, xattrs and ACLs, odd names,
// every mode), unmounts, and checks that btrfs check passes (data
// checksums too) and that the kernel's mount shows what ours showed.
func TestMountReadWrite(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	m := mountImage(t, img, nil, nil)
	const seed = 3
	btrfstest.PopulateFiles(t, m.dir, seed)
	btrfstest.PopulateSpecial(t, m.dir, seed)
	btrfstest.PopulateLinks(t, m.dir, seed)
	btrfstest.PopulateXattrs(t, m.dir, seed)
	btrfstest.PopulateNames(t, m.dir, seed)
	btrfstest.PopulateModes(t, m.dir, seed)
	want, err := btrfstest.Scan(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Entries) < 100 {
		t.Fatalf("our mount shows only %d entries: populating failed", len(want.Entries))
	}
	m.unmount(t)
	btrfstest.Check(t, []string{img}, true)
	kmnt := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(kmnt)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, want, got, btrfstest.DiffOptions{IgnoreXattr: ignoreBtrfsXattrs, CompareNlink: true})
}
