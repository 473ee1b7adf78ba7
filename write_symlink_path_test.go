package btrfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestWriteThroughSymlinks changes things through paths with symlinks in
// the middle (relative, absolute, with ".." in the target, chained), as
// Linux follows them; the read side and the kernel agree on the result.
func TestWriteThroughSymlinks(t *testing.T) {
	btrfstest.RequireInterop(t)
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
	must(fsys.MkdirAll("real/deep", 0o755))
	must(fsys.Symlink("real", "rel"))          // relative
	must(fsys.Symlink("/real/deep", "abs"))    // absolute, from the root
	must(fsys.Symlink("../real", "real/up"))   // ".." in the target
	must(fsys.Symlink("rel/up/deep", "chain")) // a link through links
	must(fsys.WriteFile("rel/a", []byte("a"), 0o644))
	must(fsys.Mkdir("abs/b", 0o755))
	must(fsys.WriteFile("real/up/c", []byte("c"), 0o644))
	must(fsys.MkdirAll("chain/d/e", 0o755))
	must(fsys.Rename("rel/a", "abs/a2"))
	must(fsys.Setxattr("chain/d", "user.x", []byte("1")))
	if _, err := fsys.Stat("rel/nosuch/x"); err == nil {
		t.Error("a path through a missing directory resolved")
	}
	want := map[string]string{"real/deep/a2": "a", "real/c": "c"}
	dirs := []string{"real/deep/b", "real/deep/d/e"}
	check := func(who string, read func(string) ([]byte, error), stat func(string) (bool, error)) {
		t.Helper()
		for name, content := range want {
			if b, err := read(name); err != nil || string(b) != content {
				t.Errorf("%s: %s: %q %v", who, name, b, err)
			}
		}
		for _, d := range dirs {
			if isDir, err := stat(d); err != nil || !isDir {
				t.Errorf("%s: %s: dir %v, %v", who, d, isDir, err)
			}
		}
	}
	ourStat := func(name string) (bool, error) {
		fi, err := fsys.Stat(name)
		return err == nil && fi.IsDir(), err
	}
	check("our view", fsys.ReadFile, ourStat)
	must(fsys.Close())
	btrfstest.Check(t, []string{img}, true)
	dir := btrfstest.Mount(t, "ro", img)
	check("the kernel", func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) },
		func(name string) (bool, error) {
			fi, err := os.Stat(filepath.Join(dir, name))
			return err == nil && fi.IsDir(), err
		})
	// The kernel resolves ".." after a symlink physically too: real/deep/a2.
	if b, err := os.ReadFile(filepath.Join(dir, "chain/d/../a2")); err != nil || string(b) != "a" {
		t.Errorf("the kernel: chain/d/../a2: %q %v", b, err)
	}
	btrfstest.Unmount(t, dir)
}
