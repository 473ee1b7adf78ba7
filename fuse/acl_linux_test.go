//go:build linux

package fuse_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// aclScript sets up directories with and without default ACLs (and a
// set-group-ID one), as root with umask 022; aclUserScript then creates
// in each as user 1000 with umask 027, so the umask, the ACLs and the
// owner all show in the result.
const (
	aclScript = `set -e
umask 022
mkdir named minimal tight plain sgid
setfacl -d -m u::rwx,u:1000:rwx,g::r-x,g:2000:rw,m::rwx,o::r-x named
setfacl -d -m u::rw,g::r,o::- minimal
setfacl -d -m u::rwx,g::x,o::- tight
chmod 777 named minimal tight plain
setfacl -m u:1000:rwx tight
chown :3000 sgid
chmod 2777 sgid
for d in named minimal tight plain sgid; do
  touch $d/f; mkdir $d/d; mkfifo $d/p; ln -s t $d/l; mkdir -p $d/d/sub; touch $d/d/g
done
`
	aclUserScript = `set -e
umask 027
for d in named minimal tight plain sgid; do
  touch $d/u; mkdir $d/ud; mkfifo $d/up; ln -s t $d/ul
done
`
)

// runACLScripts runs both scripts in dir.
func runACLScripts(t *testing.T, dir string) {
	t.Helper()
	// The user needs to reach dir: the test's temporary directory is
	// private.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{aclScript, aclUserScript} {
		// The shell changes into dir, not the forked child before its
		// exec (cmd.Dir): that child is a vfork of this process, which
		// serves the mount, and a garbage collection that starts while
		// the child waits for an answer from the mount waits for the
		// vforking thread forever (the test hung so).
		cmd := exec.Command("sh", "-c", `cd "$0" || exit 1`+"\n"+s, dir)
		if i == 1 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("script %d in %s: %v\n%s", i, dir, err, out)
		}
	}
	// O_TMPFILE files take the default ACL, group and flags of the
	// directory they are opened in, as files created there do; linkat
	// gives each a name so the views can compare them.
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, d := range []string{"named", "minimal", "tight", "plain", "sgid"} {
		fd, err := unix.Open(filepath.Join(dir, d), unix.O_TMPFILE|unix.O_WRONLY, 0o666)
		if err != nil {
			t.Fatalf("O_TMPFILE in %s: %v", d, err)
		}
		err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD,
			filepath.Join(dir, d, "tmp"), unix.AT_SYMLINK_FOLLOW)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("linkat of an O_TMPFILE file in %s: %v", d, err)
		}
	}
}

// aclView is the mode, owner, getfacl output and raw ACL attributes of
// everything under root.
func aclView(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s mode %07o owner %d:%d\n", rel, st.Mode, st.Uid, st.Gid)
		if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			return nil
		}
		out, err := exec.Command("getfacl", "-cnp", p).CombinedOutput()
		if err != nil {
			return fmt.Errorf("getfacl %s: %v\n%s", p, err, out)
		}
		b.Write(out)
		for _, name := range []string{"system.posix_acl_access", "system.posix_acl_default"} {
			buf := make([]byte, 4096)
			if n, err := unix.Lgetxattr(p, name, buf); err == nil {
				fmt.Fprintf(&b, "%s %x\n", name, buf[:n])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestMountACLInherit runs the same creations as root and as another
// user, with umasks, under directories with default ACLs, on the kernel's
// btrfs and through our mount, and compares modes, owners and ACLs: as
// our mount shows them and as the kernel's mount of our image shows them.
func TestMountACLInherit(t *testing.T) {
	requireFUSE(t)
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Skip("setfacl not installed")
	}
	kdir := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	runACLScripts(t, kdir)
	want := aclView(t, kdir)

	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	m := mountImage(t, img, &fuse.Options{AllowOther: true, DefaultPermissions: true}, nil)
	runACLScripts(t, m.dir)
	if got := aclView(t, m.dir); got != want {
		t.Errorf("our mount differs from the kernel's:\n%s", btrfstest.LineDiff(want, got))
	}
	m.unmount(t)
	btrfstest.Check(t, []string{img}, false)
	if got := aclView(t, btrfstest.Mount(t, "ro", img)); got != want {
		t.Errorf("the kernel's mount of our image differs:\n%s", btrfstest.LineDiff(want, got))
	}
}
