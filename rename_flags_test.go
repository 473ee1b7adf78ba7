package btrfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestRenameFlags checks RENAME_NOREPLACE and RENAME_EXCHANGE: errors
// change nothing, an exchange swaps files, directories (whose ".." moves)
// and a file with a directory across two parents, and the kernel reads
// the result as the btrfs package does; btrfs check passes.
func TestRenameFlags(t *testing.T) {
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
	must(fsys.MkdirAll("d1/sub", 0o755))
	must(fsys.Mkdir("d2", 0o700))
	must(fsys.WriteFile("d1/a", []byte("file a"), 0o644))
	must(fsys.WriteFile("d2/b", []byte("file b"), 0o600))
	must(fsys.WriteFile("d2/c", []byte("file c"), 0o600))
	must(fsys.Link("d2/c", "d2/c2"))

	wantErr := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("got %v, want %v", err, want)
		}
	}
	wantErr(fsys.RenameNoReplace("d1/a", "d2/b"), syscall.EEXIST)
	wantErr(fsys.RenameNoReplace("d2/c", "d2/c2"), syscall.EEXIST)
	wantErr(fsys.RenameNoReplace("d1/missing", "d2/x"), syscall.ENOENT)
	wantErr(fsys.RenameExchange("d1/a", "d2/missing"), syscall.ENOENT)
	wantErr(fsys.RenameExchange("d1", "d1/sub"), syscall.EINVAL)
	must(fsys.RenameNoReplace("d1/a", "d2/a"))
	must(fsys.RenameExchange("d2/a", "d2/b"))   // same directory
	must(fsys.RenameExchange("d2/a", "d1/sub")) // a file and a directory, two parents
	must(fsys.RenameExchange("d2/c", "d2/c2"))  // two names of one inode: nothing
	must(fsys.RenameExchange("d1", "d2"))       // two directories under the root
	must(fsys.Close())

	// d1 and d2 swapped last: d1 is the 0700 directory that held b and c.
	want := map[string]string{"d1/a": "dir", "d1/b": "file a", "d2/sub": "file b", "d1/c": "file c", "d1/c2": "file c"}
	check := func(read func(string) ([]byte, error), stat func(string) (os.FileInfo, error)) {
		t.Helper()
		for p, w := range want {
			fi, err := stat(p)
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			if w == "dir" {
				if !fi.IsDir() {
					t.Errorf("%s: not a directory", p)
				}
				continue
			}
			got, err := read(p)
			if err != nil || string(got) != w {
				t.Errorf("%s: got %q, %v; want %q", p, got, err, w)
			}
		}
	}
	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	check(ro.ReadFile, func(p string) (os.FileInfo, error) { return ro.Stat(p) })
	if fi, err := ro.Stat("d1"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("d1 after the exchange: %v, %v; want the 0700 directory", fi, err)
	}
	btrfstest.Check(t, []string{img}, true)
	dir := btrfstest.Mount(t, "ro", img)
	check(func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, p)) },
		func(p string) (os.FileInfo, error) { return os.Stat(filepath.Join(dir, p)) })
	if _, err := os.Stat(filepath.Join(dir, "d1/a/..", "b")); err != nil {
		t.Errorf("the kernel cannot walk '..' of the moved directory: %v", err)
	}
}
