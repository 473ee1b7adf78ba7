//go:build linux

package fuse_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// killScripts make set-id files as root, change them as user 1000 (a
// write, a direct write, truncate, fallocate, open with O_TRUNC) and as
// root (the same, which keeps the bits, and chown, which clears them,
// also to -1 and -1), and list the modes that result. The files' group is
// 1000, the user's, so the set-group-ID bit without group execute is
// kept by the user's changes as Linux keeps it.
const (
	killRootScript = `
for op in write dwrite trunc falloc otrunc rwrite rtrunc chown chownkeep; do
  for m in 6777 6767 4755 2775; do
    touch $op.$m; chown 0:1000 $op.$m; chmod $m $op.$m; chmod go+w $op.$m
  done
done
`
	killUserScript = `
for m in 6777 6767 4755 2775; do
  echo hi >> write.$m
  dd if=/dev/zero of=dwrite.$m bs=4096 count=1 oflag=direct conv=notrunc status=none
  truncate -s 1 trunc.$m
  fallocate -l 8192 falloc.$m
  : > otrunc.$m
done
`
	killRootScript2 = `
for m in 6777 6767 4755 2775; do
  echo hi >> rwrite.$m
  truncate -s 0 rtrunc.$m
  chown 0:0 chown.$m
  chown : chownkeep.$m
done
stat -c '%n %a %s' *
`
)

// runKillScripts runs the scripts in dir and returns the listing.
func runKillScripts(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for i, s := range []string{killRootScript, killUserScript, killRootScript2} {
		// The shell changes into dir, not the forked child (see
		// runACLScripts).
		cmd := exec.Command("sh", "-c", `set -e; cd "$0"`+s, dir)
		if i == 1 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
		}
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			t.Fatalf("script %d in %s: %v\n%s", i, dir, err, out)
		}
	}
	return strings.TrimSpace(string(out))
}

// TestMountKillSUIDGID checks that the set-user-ID and set-group-ID bits
// go as on the kernel's btrfs when files are written, truncated and
// given away, now that the mount clears them itself
// (CAP_HANDLE_KILLPRIV_V2): by the same changes on both, as root and as
// another user; then btrfs check and the kernel's view of our image.
func TestMountKillSUIDGID(t *testing.T) {
	requireFUSE(t)
	for _, tool := range []string{"fallocate", "truncate", "dd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	kdir := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	want := runKillScripts(t, kdir)

	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	m := mountImage(t, img, &fuse.Options{AllowOther: true}, nil)
	if got := runKillScripts(t, m.dir); got != want {
		t.Errorf("our mount differs from the kernel's:\n%s", btrfstest.LineDiff(want, got))
	}
	ours, err := exec.Command("sh", "-c", "cd "+m.dir+" && stat -c '%n %a %s' *").Output()
	if err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	btrfstest.Check(t, []string{img}, true)
	kern, err := exec.Command("sh", "-c", "cd "+btrfstest.Mount(t, "ro", img)+" && stat -c '%n %a %s' *").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(kern) != string(ours) {
		t.Errorf("the kernel's mount of our image differs:\n%s", btrfstest.LineDiff(string(ours), string(kern)))
	}
}
