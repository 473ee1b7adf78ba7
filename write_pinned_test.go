package btrfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestImmutableAndAppend checks that the IMMUTABLE and APPEND inode
// flags refuse what Linux refuses (EPERM), change nothing, and that the
// kernel agrees on the image we leave.
func TestImmutableAndAppend(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.WriteFile("f", []byte("data"), 0o644))
	must(fsys.Mkdir("d", 0o755))
	must(fsys.CreateEmpty("d/in", 0o644))
	must(fsys.Mkdir("a", 0o755))
	must(fsys.CreateEmpty("a/old", 0o644))
	must(fsys.SetInodeFlags("f", uint64(disk.InodeImmutable), 0))
	must(fsys.SetInodeFlags("d", uint64(disk.InodeImmutable), 0))
	must(fsys.SetInodeFlags("a", uint64(disk.InodeAppend), 0))
	for what, err := range map[string]error{
		"remove immutable file":   fsys.Remove("f"),
		"rename immutable file":   fsys.Rename("f", "g"),
		"link immutable file":     fsys.Link("f", "h"),
		"chmod immutable file":    fsys.Chmod("f", 0o600),
		"chown immutable file":    fsys.Chown("f", 1, 1),
		"setxattr immutable file": fsys.Setxattr("f", "user.x", []byte("1")),
		"create in immutable dir": fsys.CreateEmpty("d/new", 0o644),
		"remove from immutable":   fsys.Remove("d/in"),
		"rename into immutable":   fsys.Rename("a/old", "d/moved"),
		"remove from append dir":  fsys.Remove("a/old"),
		"removeall immutable dir": fsys.RemoveAll("d"),
	} {
		if !errors.Is(err, syscall.EPERM) {
			t.Errorf("%s: %v, want EPERM", what, err)
		}
	}
	must(fsys.CreateEmpty("a/new", 0o644)) // an append-only directory takes new entries
	must(fsys.Commit())
	fsys.Close()
	btrfstest.Check(t, []string{img}, true)
	dir := btrfstest.Mount(t, "", img)
	for _, p := range []string{"f", "d/in", "a/old"} {
		if err := os.Remove(filepath.Join(dir, p)); !errors.Is(err, syscall.EPERM) {
			t.Errorf("kernel removing %s: %v, want EPERM", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a/new")); err != nil {
		t.Error(err)
	}
}
