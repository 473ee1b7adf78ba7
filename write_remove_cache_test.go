package btrfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestRemoveKeepsPathsTrue removes, moves and remakes directories whose
// paths the running transaction has already resolved (and remembered, one
// name at a time: dropName forgets only the name it drops), then checks
// that every path leads where it should, in the same transaction and, via
// the kernel's mount, after the commit.
func TestRemoveKeepsPathsTrue(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{DirtyLimit: -1, CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("mkdir", fsys.MkdirAll("a/b/c", 0o755))
	step("write a/b/c/f", fsys.WriteFile("a/b/c/f", []byte("old"), 0o644))
	step("write a/b/c/g", fsys.WriteFile("a/b/c/g", []byte("g"), 0o644))
	// a/b/c is remembered now. Remove it and make a new one there.
	step("remove f", fsys.Remove("a/b/c/f"))
	step("remove g", fsys.Remove("a/b/c/g"))
	step("rmdir c", fsys.Remove("a/b/c"))
	if err := fsys.WriteFile("a/b/c/f", []byte("x"), 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("write into the removed a/b/c: %v, want ErrNotExist", err)
	}
	step("mkdir c again", fsys.Mkdir("a/b/c", 0o700))
	step("write new f", fsys.WriteFile("a/b/c/f", []byte("new"), 0o644))
	// Move a/b away and put another directory in its place.
	step("rename b", fsys.Rename("a/b", "a/old"))
	step("mkdir b again", fsys.Mkdir("a/b", 0o750))
	step("write a/b/h", fsys.WriteFile("a/b/h", []byte("h"), 0o644))
	if _, err := fsys.Lstat("a/b/c"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a/b/c after a/b moved: %v, want ErrNotExist", err)
	}
	// Replace a directory by a rename over it.
	step("mkdir x", fsys.MkdirAll("x/y", 0o755))
	step("write x/y/z", fsys.WriteFile("x/y/z", []byte("z"), 0o644))
	step("remove x/y/z", fsys.Remove("x/y/z"))
	step("mkdir w", fsys.MkdirAll("w/v", 0o755))
	step("rename w/v over x/y", fsys.Rename("w/v", "x/y"))
	step("write x/y/u", fsys.WriteFile("x/y/u", []byte("u"), 0o644))
	want := map[string]string{"a/old/c/f": "new", "a/b/h": "h", "x/y/u": "u"}
	for p, v := range want {
		got, err := fsys.ReadFile(p)
		if err != nil || string(got) != v {
			t.Fatalf("%s = %q, %v; want %q", p, got, err, v)
		}
	}
	step("close", fsys.Close())
	btrfstest.Check(t, []string{img}, true)
	dir := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	for p, v := range want {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != v {
			t.Errorf("kernel: %s = %q, %v; want %q", p, b, err, v)
		}
	}
	compareScan(t, got, map[string]*wantEntry{
		".":         {typ: btrfstest.TypeDir, perm: 0o755},
		"a":         {typ: btrfstest.TypeDir, perm: 0o755},
		"a/b":       {typ: btrfstest.TypeDir, perm: 0o750},
		"a/b/h":     {typ: btrfstest.TypeRegular, perm: 0o644},
		"a/old":     {typ: btrfstest.TypeDir, perm: 0o755},
		"a/old/c":   {typ: btrfstest.TypeDir, perm: 0o700},
		"a/old/c/f": {typ: btrfstest.TypeRegular, perm: 0o644},
		"w":         {typ: btrfstest.TypeDir, perm: 0o755},
		"x":         {typ: btrfstest.TypeDir, perm: 0o755},
		"x/y":       {typ: btrfstest.TypeDir, perm: 0o755},
		"x/y/u":     {typ: btrfstest.TypeRegular, perm: 0o644},
	})
}
