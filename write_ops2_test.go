package btrfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"golang.org/x/sys/unix"
)

// ops2Must fails the test on err.
func ops2Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ops2Open opens img writable and closes it at the end of the test.
func ops2Open(t *testing.T, img string) *btrfs.FS {
	t.Helper()
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

// ops2State prints every inode attribute our read view shows, per path,
// so that two states can be compared exactly (times, sizes, link counts,
// owners, device numbers, targets, xattrs, inode numbers).
func ops2State(t *testing.T, fsys *btrfs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := fsys.Lstat(p)
		if err != nil {
			return err
		}
		st := *fi.Sys().(*btrfs.Stat)
		s := fmt.Sprintf("%+v", st)
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := fsys.ReadLink(p)
			if err != nil {
				return err
			}
			s += " -> " + target
		}
		xs, err := fsys.Xattrs(p)
		if err != nil {
			return err
		}
		for _, x := range xs {
			s += fmt.Sprintf(" %s=%q", x.Name, x.Value)
		}
		out[p] = s
		return nil
	})
	if err != nil {
		t.Fatalf("walking our read view: %v", err)
	}
	return out
}

// ops2Same reports the differences of two states.
func ops2Same(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s: gone", p)
		} else if a != b {
			t.Errorf("%s: changed\nbefore %s\nafter  %s", p, b, a)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: appeared", p)
		}
	}
}

// ops2Case is one call that must fail with an errno (or succeed without
// changing anything when want is nil).
type ops2Case struct {
	name string
	run  func() error
	want error
	two  bool // reported as *os.LinkError (two-path operations)
}

// ops2Check runs cases and checks their errors and error types.
func ops2Check(t *testing.T, cases []ops2Case) {
	t.Helper()
	for _, c := range cases {
		err := c.run()
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want success", c.name, err)
			}
			continue
		}
		var pe *fs.PathError
		var le *os.LinkError
		typed := errors.As(err, &pe)
		if c.two {
			typed = errors.As(err, &le)
		}
		if !typed || !errors.Is(err, c.want) {
			t.Errorf("%s: got %v (%T), want %v (two paths: %v)", c.name, err, err, c.want, c.two)
		}
	}
}

// TestOps2Errors checks that every expected failure of the new operations
// reports the kernel's errno with the os package's error type and changes
// nothing: the committed state afterwards is identical, times included.
func TestOps2Errors(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096})
	fsys := ops2Open(t, img)
	for _, d := range []string{"a", "a/b", "a/b/c", "e", "full"} {
		ops2Must(t, fsys.Mkdir(d, 0o755))
	}
	ops2Must(t, fsys.CreateEmpty("f", 0o644))
	ops2Must(t, fsys.CreateEmpty("full/x", 0o644))
	ops2Must(t, fsys.Link("f", "a/f2"))
	ops2Must(t, fsys.Symlink("f", "s"))
	ops2Must(t, fsys.Mknod("p", fs.ModeNamedPipe|0o644, 0))
	ops2Must(t, fsys.Setxattr("f", "user.x", []byte("1")))
	ops2Must(t, fsys.Commit())
	before := ops2State(t, fsys)
	long := strings.Repeat("n", 256)
	ops2Check(t, ops2ErrorCases(fsys, long))
	ops2Must(t, fsys.Commit())
	ops2Same(t, before, ops2State(t, fsys))
	ops2Must(t, fsys.Close())
	btrfstest.Check(t, []string{img}, false)
}

// ops2ErrorCases lists the failures TestOps2Errors expects.
func ops2ErrorCases(fsys *btrfs.FS, long string) []ops2Case {
	return []ops2Case{
		{"link missing", func() error { return fsys.Link("nope", "n") }, syscall.ENOENT, true},
		{"link existing", func() error { return fsys.Link("f", "s") }, syscall.EEXIST, true},
		{"link dir", func() error { return fsys.Link("a", "n") }, syscall.EPERM, true},
		{"link root", func() error { return fsys.Link(".", "n") }, syscall.EPERM, true},
		{"link onto root", func() error { return fsys.Link("f", ".") }, syscall.EEXIST, true},
		{"link parent missing", func() error { return fsys.Link("f", "nope/n") }, syscall.ENOENT, true},
		{"link parent file", func() error { return fsys.Link("f", "f/n") }, syscall.ENOTDIR, true},
		{"link long", func() error { return fsys.Link("f", long) }, syscall.ENAMETOOLONG, true},
		{"link invalid", func() error { return fsys.Link("f", "a/../n") }, fs.ErrInvalid, true},
		{"link nul", func() error { return fsys.Link("f", "a\x00b") }, syscall.EINVAL, true},
		{"rename missing", func() error { return fsys.Rename("nope", "n") }, syscall.ENOENT, true},
		{"rename into itself", func() error { return fsys.Rename("a", "a/b/c/n") }, syscall.EINVAL, true},
		{"rename onto itself inside", func() error { return fsys.Rename("a", "a/b") }, syscall.EINVAL, true},
		{"rename onto ancestor", func() error { return fsys.Rename("a/b/c", "a") }, syscall.ENOTEMPTY, true},
		{"rename file onto ancestor", func() error { return fsys.Rename("a/f2", "a") }, syscall.ENOTEMPTY, true},
		{"rename dir over file", func() error { return fsys.Rename("e", "f") }, syscall.ENOTDIR, true},
		{"rename file over dir", func() error { return fsys.Rename("f", "e") }, syscall.EISDIR, true},
		{"rename dir over nonempty", func() error { return fsys.Rename("e", "full") }, syscall.ENOTEMPTY, true},
		{"rename root", func() error { return fsys.Rename(".", "n") }, syscall.EBUSY, true},
		{"rename onto root", func() error { return fsys.Rename("e", ".") }, syscall.EBUSY, true},
		{"rename parent missing", func() error { return fsys.Rename("f", "nope/n") }, syscall.ENOENT, true},
		{"rename parent file", func() error { return fsys.Rename("f", "s/n") }, syscall.ENOTDIR, true},
		{"rename long", func() error { return fsys.Rename("f", long) }, syscall.ENAMETOOLONG, true},
		{"rename invalid", func() error { return fsys.Rename("f", "/n") }, fs.ErrInvalid, true},
		{"rename same", func() error { return fsys.Rename("f", "f") }, nil, true},
		{"rename hard link pair", func() error { return fsys.Rename("f", "a/f2") }, nil, true},
		{"symlink empty", func() error { return fsys.Symlink("", "n") }, syscall.ENOENT, true},
		{"symlink 4096", func() error { return fsys.Symlink(strings.Repeat("t", 4096), "n") }, syscall.ENAMETOOLONG, true},
		{"symlink past inline", func() error { return fsys.Symlink(strings.Repeat("t", 3950), "n") }, syscall.ENAMETOOLONG, true},
		{"symlink nul", func() error { return fsys.Symlink("a\x00", "n") }, syscall.EINVAL, true},
		{"symlink existing", func() error { return fsys.Symlink("t", "f") }, syscall.EEXIST, true},
		{"symlink parent missing", func() error { return fsys.Symlink("t", "nope/n") }, syscall.ENOENT, true},
		{"mknod regular", func() error { return fsys.Mknod("n", 0o644, 0) }, syscall.EINVAL, false},
		{"mknod dir", func() error { return fsys.Mknod("n", fs.ModeDir|0o755, 0) }, syscall.EINVAL, false},
		{"mknod big major", func() error { return fsys.Mknod("n", fs.ModeDevice, unix.Mkdev(4096, 1)) }, syscall.EINVAL, false},
		{"mknod existing", func() error { return fsys.Mknod("f", fs.ModeNamedPipe, 0) }, syscall.EEXIST, false},
		{"mknod long", func() error { return fsys.Mknod(long, fs.ModeSocket, 0) }, syscall.ENAMETOOLONG, false},
		{"chown missing", func() error { return fsys.Chown("nope", 1, 1) }, syscall.ENOENT, false},
		{"chown bad uid", func() error { return fsys.Chown("f", -2, 1) }, syscall.EINVAL, false},
		{"chown uid -1 as u32", func() error { return fsys.Chown("f", 1<<32-1, -1) }, syscall.EINVAL, false},
		{"chown big gid", func() error { return fsys.Chown("f", -1, 1<<32) }, syscall.EINVAL, false},
		{"removexattr absent", func() error { return fsys.Removexattr("f", "user.y") }, errNoData, false},
		{"removexattr namespace", func() error { return fsys.Removexattr("f", "other.x") }, syscall.EOPNOTSUPP, false},
		{"removexattr long", func() error { return fsys.Removexattr("f", "user."+long) }, syscall.ERANGE, false},
		{"removexattr missing", func() error { return fsys.Removexattr("nope", "user.x") }, syscall.ENOENT, false},
		{"mkdirall through file", func() error { return fsys.MkdirAll("f/x/y", 0o755) }, syscall.ENOTDIR, false},
		{"mkdirall at file", func() error { return fsys.MkdirAll("a/f2", 0o755) }, syscall.ENOTDIR, false},
		{"mkdirall long", func() error { return fsys.MkdirAll("a/new/"+long, 0o755) }, syscall.ENAMETOOLONG, false},
		{"mkdirall invalid", func() error { return fsys.MkdirAll("a//b", 0o755) }, fs.ErrInvalid, false},
		{"mkdirall existing", func() error { return fsys.MkdirAll("a/b/c", 0o700) }, nil, false},
		{"mkdirall root", func() error { return fsys.MkdirAll(".", 0o700) }, nil, false},
		{"removeall root", func() error { return fsys.RemoveAll(".") }, syscall.EINVAL, false},
		{"removeall through file", func() error { return fsys.RemoveAll("f/x") }, syscall.ENOTDIR, false},
		{"removeall missing", func() error { return fsys.RemoveAll("nope") }, nil, false},
		{"removeall missing parent", func() error { return fsys.RemoveAll("nope/x/y") }, nil, false},
	}
}

// TestOps2NoExtref fills the INODE_REF item of a file on a filesystem
// without EXTENDED_IREF: the next link is EMLINK, as with the kernel, and
// what was made passes btrfs check.
func TestOps2NoExtref(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096, Features: "^extref"})
	fsys := ops2Open(t, img)
	ops2Must(t, fsys.CreateEmpty("t", 0o644))
	// INODE_REF entries are 10 bytes + name; a 4 KiB leaf's largest item
	// is 4096 - 101 - 25 = 3970 bytes; "t" takes 11.
	const nameLen = 200
	want := (3970 - 11) / (10 + nameLen)
	n := 0
	var err error
	for ; n < 100; n++ {
		if err = fsys.Link("t", fmt.Sprintf("%0*d", nameLen, n)); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.EMLINK) || n != want {
		t.Fatalf("after %d links: %v; want EMLINK after %d", n, err, want)
	}
	// A rename inside the directory frees the room it needs first.
	ops2Must(t, fsys.Rename(fmt.Sprintf("%0*d", nameLen, 0), fmt.Sprintf("%0*d", nameLen, 1000)))
	// Another directory has its own INODE_REF item.
	ops2Must(t, fsys.Mkdir("d", 0o755))
	ops2Must(t, fsys.Link("t", "d/"+strings.Repeat("x", nameLen)))
	ops2Must(t, fsys.Commit())
	fi, err := fsys.Lstat("t")
	ops2Must(t, err)
	if got := fi.Sys().(*btrfs.Stat).Nlink; got != uint32(want+2) {
		t.Errorf("nlink %d, want %d", got, want+2)
	}
	ops2Must(t, fsys.Close())
	btrfstest.Check(t, []string{img}, false)
}

// ops2LinkName is the name of hard link i in the extref tests: long, so
// that the INODE_REF item fills after a few hundred names.
func ops2LinkName(i int) string {
	return fmt.Sprintf("link-with-a-rather-long-name-to-fill-%04d", i)
}

// ops2DumpCount counts the lines of btrfs inspect-internal dump-tree of
// the top-level subvolume that contain what.
func ops2DumpCount(t *testing.T, img, what string) int {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "5", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree: %v\n%s", err, out)
	}
	return strings.Count(string(out), what)
}

// TestOps2Extref links one file 340 times in one directory, so that its
// names go into INODE_EXTREF items, renames and removes names of both
// kinds, and checks btrfs check and the link count after each commit.
func TestOps2Extref(t *testing.T) {
	btrfstest.RequireProgs(t)
	for _, ns := range []int{4096, 16384} {
		t.Run(fmt.Sprint(ns), func(t *testing.T) {
			img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: ns})
			fsys := ops2Open(t, img)
			ops2Must(t, fsys.MkdirAll("x/links", 0o755))
			ops2Must(t, fsys.CreateEmpty("x/target", 0o644))
			for i := 0; i < 340; i++ {
				ops2Must(t, fsys.Link("x/target", "x/links/"+ops2LinkName(i)))
			}
			ops2Must(t, fsys.Commit())
			ops2Must(t, fsys.Close())
			btrfstest.Check(t, []string{img}, false)
			if n := ops2DumpCount(t, img, "INODE_EXTREF"); n == 0 {
				t.Fatal("no INODE_EXTREF item after 340 links")
			}
			fsys = ops2Open(t, img)
			ops2Must(t, fsys.Rename("x/links/"+ops2LinkName(5), "x/links/renamed-5"))
			ops2Must(t, fsys.Rename("x/links/"+ops2LinkName(335), "x/renamed-335"))
			ops2Must(t, fsys.Rename("x/links/"+ops2LinkName(334), "x/links/"+ops2LinkName(333))) // replaces: same inode, no-op
			ops2Must(t, fsys.Remove("x/links/"+ops2LinkName(336)))
			ops2Must(t, fsys.Remove("x/links/"+ops2LinkName(1)))
			ops2Must(t, fsys.Commit())
			fi, err := fsys.Lstat("x/renamed-335")
			ops2Must(t, err)
			if got := fi.Sys().(*btrfs.Stat).Nlink; got != 339 {
				t.Errorf("nlink %d, want 339", got)
			}
			ops2Must(t, fsys.Close())
			btrfstest.Check(t, []string{img}, false)
			fsys = ops2Open(t, img)
			ops2Must(t, fsys.RemoveAll("x"))
			ops2Must(t, fsys.Commit())
			ops2Must(t, fsys.Close())
			btrfstest.Check(t, []string{img}, false)
			if n := ops2DumpCount(t, img, "INODE_EXTREF"); n != 0 {
				t.Errorf("%d INODE_EXTREF items left after RemoveAll", n)
			}
		})
	}
}
