package btrfs_test

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestStatInodeLookupInode finds inodes by number and names by directory
// inode, in the top level and in a nested subvolume, committed or not, and
// checks that they describe what Lstat of the path does.
func TestStatInodeLookupInode(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.MkdirAll("a/b", 0o755))
	must(fsys.WriteFile("a/b/f", []byte("data"), 0o640))
	must(fsys.Symlink("b/f", "a/l"))
	_, err = fsys.CreateSubvolume("a/sv", nil)
	must(err)
	must(fsys.WriteFile("a/sv/g", []byte("in sv"), 0o600))
	stat := func(fi fs.FileInfo) btrfs.Stat { return *fi.Sys().(*btrfs.Stat) }
	for _, commit := range []bool{false, true} {
		if commit {
			must(fsys.Commit())
		}
		for _, c := range []struct{ dir, name string }{{"a", "b"}, {"a/b", "f"}, {"a", "l"}, {"a", "sv"}, {"a/sv", "g"}} {
			dfi, err := fsys.Lstat(c.dir)
			must(err)
			d := stat(dfi)
			want, err := fsys.Lstat(c.dir + "/" + c.name)
			must(err)
			got, err := fsys.LookupInode(d.Subvolume, d.Ino, c.name)
			if err != nil || stat(got) != stat(want) {
				t.Errorf("LookupInode(%s, %s): %+v, %v; want %+v", c.dir, c.name, got, err, stat(want))
				continue
			}
			byNum, err := fsys.StatInode(stat(want).Subvolume, stat(want).Ino)
			if err != nil || stat(byNum) != stat(want) {
				t.Errorf("StatInode of %s/%s: %v; want %+v", c.dir, c.name, err, stat(want))
			}
			f, err := fsys.OpenInode(stat(want).Subvolume, stat(want).Ino)
			must(err)
			fi, err := f.Stat()
			if err != nil || stat(fi) != stat(want) {
				t.Errorf("OpenInode of %s/%s: Stat %v; want %+v", c.dir, c.name, err, stat(want))
			}
			f.Close()
		}
	}
	root, err := fsys.Lstat(".")
	must(err)
	r := stat(root)
	if _, err := fsys.LookupInode(r.Subvolume, r.Ino, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing name: %v", err)
	}
	if _, err := fsys.LookupInode(r.Subvolume, r.Ino, "a/b"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("a name with a slash: %v", err)
	}
	f, err := fsys.Lstat("a/b/f")
	must(err)
	if _, err := fsys.LookupInode(r.Subvolume, stat(f).Ino, "x"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("lookup in a file: %v", err)
	}
	// A file opened by number writes and reads like one opened by name.
	fh, err := fsys.OpenInode(stat(f).Subvolume, stat(f).Ino)
	must(err)
	if _, err := fh.WriteAt([]byte("DA"), 0); err != nil {
		t.Fatal(err)
	}
	if b, err := fsys.ReadFile("a/b/f"); err != nil || string(b) != "DAta" {
		t.Errorf("after a write through OpenInode: %q, %v", b, err)
	}
	fh.Close()
	must(fsys.Remove("a/b/f"))
	if _, err := fsys.StatInode(r.Subvolume, stat(f).Ino); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("StatInode of a removed file: %v", err)
	}
	if _, err := fsys.StatInode(1, 256); err == nil {
		t.Errorf("StatInode in the root tree: no error")
	}
	must(fsys.Close())
	btrfstest.Check(t, []string{img}, true)
}
