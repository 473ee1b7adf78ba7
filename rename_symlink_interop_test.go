package btrfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestRenameThroughSymlinks: whether a rename moves a directory under
// itself (EINVAL) or replaces a directory holding the source (ENOTEMPTY)
// is decided on the directories, not on the paths' text, which may pass
// through symlinks: each case gives the kernel's answer (found by the
// random model test: a symlink to a directory renamed into it).
func TestRenameThroughSymlinks(t *testing.T) {
	btrfstest.RequireInterop(t)
	cases := []struct{ from, to string }{
		{"l", "l/x"},     // the symlink moves into the directory it names
		{"d", "l/x"},     // d under itself through l: EINVAL
		{"d/e", "ld"},    // replaces a symlink, fine
		{"d/e/f", "l/e"}, // d/e holds the source: ENOTEMPTY
		{"d", "d/x"},     // under itself by name
		{"k", "l/k2"},    // a plain file into d through l
	}
	setup := func(mkdir func(string) error, symlink func(string, string) error, write func(string) error) {
		for _, err := range []error{mkdir("d"), mkdir("d/e"), mkdir("d/e/f"), symlink("d", "l"), symlink("d/e", "ld"), write("k")} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	kimg := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	mnt := btrfstest.Mount(t, "", kimg)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	errno := func(err error) error {
		var e syscall.Errno
		if errors.As(err, &e) {
			return e
		}
		return err
	}
	for i, c := range cases {
		kdir := filepath.Join(mnt, string(rune('a'+i)))
		odir := string(rune('a' + i))
		if err := os.Mkdir(kdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Mkdir(odir, 0o755); err != nil {
			t.Fatal(err)
		}
		setup(func(p string) error { return os.Mkdir(filepath.Join(kdir, p), 0o755) },
			func(tg, p string) error { return os.Symlink(tg, filepath.Join(kdir, p)) },
			func(p string) error { return os.WriteFile(filepath.Join(kdir, p), []byte("k"), 0o644) })
		setup(func(p string) error { return fsys.Mkdir(odir+"/"+p, 0o755) },
			func(tg, p string) error { return fsys.Symlink(tg, odir+"/"+p) },
			func(p string) error { return fsys.WriteFile(odir+"/"+p, []byte("k"), 0o644) })
		// syscall.Rename, not os.Rename, which answers EEXIST itself
		// for any existing directory as the new name.
		kerr := errno(syscall.Rename(filepath.Join(kdir, c.from), filepath.Join(kdir, c.to)))
		oerr := errno(fsys.Rename(odir+"/"+c.from, odir+"/"+c.to))
		if kerr != oerr {
			t.Errorf("rename %s %s: ours %v, kernel %v", c.from, c.to, oerr, kerr)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	list := func(root string) []string {
		var l []string
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			l = append(l, rel+" "+d.Type().String())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	want := list(mnt)
	got := list(btrfstest.Mount(t, "ro", img))
	if !slices.Equal(got, want) {
		t.Errorf("names after the renames:\n ours   %q\n kernel %q", got, want)
	}
}
