package btrfs_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// aclCreate is one creation in TestDefaultACLInherit: kind (file, dir,
// fifo, symlink) at path with mode, made by the kernel with the process's
// umask and by us with CreateOptions carrying the same umask.
type aclCreate struct {
	kind, path string
	mode       uint32
}

// aclParents are the directories the creations go into, set up alike on
// both sides: a default ACL with named entries and a mask, a default ACL
// that says no more than a mode (so children get no access ACL), one
// without a mask whose group entry masks the mode instead, no default ACL
// (the umask applies), and a set-group-ID directory of another group.
var aclParents = []struct {
	dir      string
	setfacl  []string
	chownGID int
	mode     uint32
}{
	{dir: "named", setfacl: []string{"-d", "-m", "u::rwx,u:1000:rwx,g::r-x,g:2000:rw,m::rwx,o::r-x"}, mode: 0o755},
	{dir: "minimal", setfacl: []string{"-d", "-m", "u::rw,g::r,o::-"}, mode: 0o755},
	{dir: "tight", setfacl: []string{"-d", "-m", "u::rwx,g::x,o::-"}, mode: 0o711},
	{dir: "plain", mode: 0o755},
	{dir: "sgid", chownGID: 3000, mode: 0o2775},
}

// TestDefaultACLInherit makes the same inodes on the kernel's btrfs and
// on ours under directories with and without default ACLs, and compares
// what getfacl shows, the modes and the owners, on the kernel's mount of
// each image.
func TestDefaultACLInherit(t *testing.T) {
	btrfstest.RequireInterop(t)
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Skip("setfacl not installed")
	}
	umask := processUmask(t)
	var creates []aclCreate
	for _, p := range aclParents {
		creates = append(creates,
			aclCreate{"file", p.dir + "/f666", 0o666},
			aclCreate{"file", p.dir + "/f640", 0o640},
			aclCreate{"file", p.dir + "/f4755", 0o4755},
			aclCreate{"dir", p.dir + "/d777", 0o777},
			aclCreate{"dir", p.dir + "/d750", 0o750},
			aclCreate{"fifo", p.dir + "/p", 0o666},
			aclCreate{"symlink", p.dir + "/l", 0o777},
			// A grandchild: the inherited default ACL is passed on.
			aclCreate{"file", p.dir + "/d777/g", 0o664})
	}

	kdir := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	for _, p := range aclParents {
		hp := filepath.Join(kdir, p.dir)
		must(t, os.Mkdir(hp, 0o700))
		must(t, os.Chown(hp, 0, p.chownGID))
		must(t, unix.Chmod(hp, p.mode))
		if p.setfacl != nil {
			if out, err := exec.Command("setfacl", append(p.setfacl, hp)...).CombinedOutput(); err != nil {
				t.Fatalf("setfacl %v: %v\n%s", p.setfacl, err, out)
			}
		}
	}
	for _, c := range creates {
		hp := filepath.Join(kdir, c.path)
		var err error
		switch c.kind {
		case "file":
			err = unix.Mknod(hp, syscall.S_IFREG|c.mode, 0)
		case "dir":
			err = unix.Mkdir(hp, c.mode)
		case "fifo":
			err = unix.Mknod(hp, syscall.S_IFIFO|c.mode, 0)
		case "symlink":
			err = os.Symlink("target", hp)
		}
		must(t, err)
	}
	want := aclView(t, kdir, creates)

	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for _, p := range aclParents {
		must(t, fsys.Mkdir(p.dir, 0o700))
		must(t, fsys.Chown(p.dir, 0, p.chownGID))
		must(t, fsys.Chmod(p.dir, btrfs.FileModeOf(p.mode)))
		if p.setfacl != nil {
			v, err := unix.Lgetxattr(filepath.Join(kdir, p.dir), "system.posix_acl_default", make([]byte, 4096))
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, v)
			if _, err := unix.Lgetxattr(filepath.Join(kdir, p.dir), "system.posix_acl_default", buf); err != nil {
				t.Fatal(err)
			}
			must(t, fsys.Setxattr(p.dir, "system.posix_acl_default", buf))
		}
	}
	opts := &btrfs.CreateOptions{Umask: btrfs.FileModeOf(umask)}
	for _, c := range creates {
		m := btrfs.FileModeOf(c.mode)
		var err error
		switch c.kind {
		case "file":
			err = fsys.CreateEmptyWith(c.path, m, opts)
		case "dir":
			err = fsys.MkdirWith(c.path, m, opts)
		case "fifo":
			err = fsys.MknodWith(c.path, m|os.ModeNamedPipe, 0, opts)
		case "symlink":
			err = fsys.SymlinkWith("target", c.path, opts)
		}
		must(t, err)
	}
	must(t, fsys.Commit())
	must(t, fsys.Close())
	btrfstest.Check(t, []string{img}, false)
	got := aclView(t, btrfstest.Mount(t, "ro", img), creates)
	if got != want {
		t.Errorf("umask %03o: our image differs from the kernel's:\n%s", umask, btrfstest.LineDiff(want, got))
	}
}

// TestCreateExact checks that Exact ignores the directory: no ACL, no
// umask, no set-group-ID group.
func TestCreateExact(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	def := acl([3]uint32{1, 7, 0}, [3]uint32{2, 7, 1000}, [3]uint32{4, 5, 0}, [3]uint32{0x10, 7, 0}, [3]uint32{0x20, 0, 0})
	must(t, fsys.Mkdir("d", 0o755))
	must(t, fsys.Chown("d", 0, 3000))
	must(t, fsys.Chmod("d", btrfs.FileModeOf(0o2755)))
	must(t, fsys.Setxattr("d", "system.posix_acl_default", def))
	exact := &btrfs.CreateOptions{UID: 5, GID: 6, Umask: 0o077, Exact: true}
	must(t, fsys.MkdirWith("d/x", 0o751, exact))
	must(t, fsys.CreateEmptyWith("d/y", 0o644, &btrfs.CreateOptions{UID: 5, GID: 6}))
	st := lstat(t, fsys, "d/x")
	if st.Mode&0o7777 != 0o751 || st.UID != 5 || st.GID != 6 {
		t.Errorf("exact dir: mode %o owner %d:%d, want 751 5:6", st.Mode&0o7777, st.UID, st.GID)
	}
	if xs, err := fsys.Xattrs("d/x"); err != nil || len(xs) != 0 {
		t.Errorf("exact dir: xattrs %v, %v; want none", xs, err)
	}
	// Not exact: the ACL masks the mode (other gets nothing), the
	// group is the directory's.
	st = lstat(t, fsys, "d/y")
	if st.Mode&0o7777 != 0o640 || st.UID != 5 || st.GID != 3000 {
		t.Errorf("inheriting file: mode %o owner %d:%d, want 640 5:3000", st.Mode&0o7777, st.UID, st.GID)
	}
	must(t, fsys.Commit())
	must(t, fsys.Close())
	btrfstest.Check(t, []string{img}, false)
}

func lstat(t *testing.T, fsys *btrfs.FS, name string) *btrfs.Stat {
	t.Helper()
	fi, err := fsys.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*btrfs.Stat)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// processUmask reads the umask from /proc (umask(2) would change it for
// every goroutine while it looks).
func processUmask(t *testing.T) uint32 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			u, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(u)
		}
	}
	t.Skip("no Umask in /proc/self/status")
	return 0
}

// aclView is what getfacl, the mode and the owner show of every created
// path under root and of the parents.
func aclView(t *testing.T, root string, creates []aclCreate) string {
	t.Helper()
	var b strings.Builder
	paths := []string{}
	for _, p := range aclParents {
		paths = append(paths, p.dir)
	}
	for _, c := range creates {
		paths = append(paths, c.path)
	}
	for _, p := range paths {
		hp := filepath.Join(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(hp, &st); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s mode %07o owner %d:%d\n", p, st.Mode, st.Uid, st.Gid)
		if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			continue
		}
		out, err := exec.Command("getfacl", "-cnp", hp).CombinedOutput()
		if err != nil {
			t.Fatalf("getfacl %s: %v\n%s", p, err, out)
		}
		b.Write(out)
		for _, name := range []string{"system.posix_acl_access", "system.posix_acl_default"} {
			buf := make([]byte, 4096)
			n, err := unix.Lgetxattr(hp, name, buf)
			if err == nil {
				fmt.Fprintf(&b, "%s %x\n", name, buf[:n])
			}
		}
	}
	return b.String()
}

// TestCreateOwnerAtomic makes files owned by another user while commits
// run beside the creations, and copies the image after each commit (as a
// crash then would leave it): no committed state shows a new file owned
// by root, since the owner is set by the change that makes the file.
func TestCreateOwnerAtomic(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	const commits = 12
	opts := &btrfs.CreateOptions{UID: 1000, GID: 1001}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := fsys.CreateEmptyWith(fmt.Sprintf("f%d", i), 0o644, opts); err != nil {
				done <- err
				return
			}
			if err := fsys.MkdirWith(fmt.Sprintf("d%d", i), 0o755, opts); err != nil {
				done <- err
				return
			}
		}
	}()
	seen := 0
	for i := range commits {
		if err := fsys.Commit(); err != nil {
			close(stop)
			t.Fatalf("commit %d: %v (creations: %v)", i, err, <-done)
		}
		// Between commits the image on disk is the last commit's:
		// what a crash now would leave.
		ro, err := btrfs.Open(img, nil)
		must(t, err)
		ents, err := ro.ReadDir(".")
		must(t, err)
		for _, e := range ents {
			fi, err := e.Info()
			must(t, err)
			st := fi.Sys().(*btrfs.Stat)
			if st.UID != 1000 || st.GID != 1001 {
				t.Errorf("commit %d: %s owned by %d:%d", i, e.Name(), st.UID, st.GID)
			}
		}
		seen = len(ents)
		must(t, ro.Close())
	}
	close(stop)
	must(t, <-done)
	t.Logf("%d commits, %d entries at the last", commits, seen)
	must(t, fsys.Close())
	btrfstest.Check(t, []string{img}, false)
}
