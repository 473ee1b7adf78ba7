package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestSetfaclGetfacl runs the same setfacl commands with gobtrfs on an
// image and with setfacl(1) on the kernel's mount of a copy of it, then
// compares getfacl(1) and stat on both, and gobtrfs getfacl with
// getfacl(1) on the same mount.
func TestSetfaclGetfacl(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	ok(t, "mkdir", "-p", img+":/d/sub", img+":/e")
	ok(t, "touch", img+":/f", img+":/g", img+":/h", img+":/d/x", img+":/with space")
	ok(t, "chmod", "4750", img+":/h")
	ok(t, "chmod", "1777", img+":/e")
	btrfstest.Check(t, []string{img}, false)
	copyImg := filepath.Join(t.TempDir(), "kernel.img")
	data, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyImg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	steps := [][]string{
		{"-m", "u:bin:rwx,u:daemon:rw,g:adm:rwx,g:users:r,m::r", "f"},
		{"-m", "u:1234:rx", "-m", "g:4321:w", "g"},
		{"-x", "g:4321", "g"},
		{"-m", "u:bin:rwX", "h"},
		{"-d", "-m", "u:bin:rx", "d"},
		{"-m", "d:g:adm:rwx,u:daemon:r", "d/sub"},
		{"-m", "o::7,g::5", "with space"},
		{"-n", "-m", "u:2:r", "e"},
		{"-x", "u:daemon", "f"},
		{"-b", "d/sub"},
		{"-k", "d"},
		{"-m", "u:bin:rw", "d/x"},
		{"-x", "u:bin", "d/x"},
	}
	mnt := btrfstest.Mount(t, "", copyImg)
	for _, s := range steps {
		n := len(s) - 1
		_, stderr, code := run(t, append(append([]string{"setfacl"}, s[:n]...), img+":/"+s[n])...)
		kout, kerr := exec.Command("setfacl", append(append([]string{}, s[:n]...), filepath.Join(mnt, s[n]))...).CombinedOutput()
		if code != 0 || kerr != nil {
			t.Errorf("setfacl %v: gobtrfs exit %d %q, setfacl(1) %v %q", s, code, stderr, kerr, kout)
		}
	}
	files := []string{".", "f", "g", "h", "d", "d/sub", "d/x", "e", "with space"}
	view := func(dir string) string {
		cmd := exec.Command("getfacl", append([]string{"-n"}, files...)...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("getfacl: %v", err)
		}
		cmd = exec.Command("stat", append([]string{"-c", "%A %n"}, files...)...)
		cmd.Dir = dir
		modes, err := cmd.Output()
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		return string(out) + string(modes)
	}
	kernelView := view(mnt)
	btrfstest.Unmount(t, mnt)
	btrfstest.Check(t, []string{img}, false)

	mnt = btrfstest.Mount(t, "ro", img)
	if got := view(mnt); got != kernelView {
		t.Errorf("after gobtrfs setfacl:\n%s\nafter setfacl(1) on the kernel:\n%s", got, kernelView)
	}
	for _, opts := range [][]string{nil, {"-n"}, {"-a"}, {"-d"}, {"-c"}, {"-e"}, {"-E"}, {"-s"}} {
		cmd := exec.Command("getfacl", append(append([]string{}, opts...), files...)...)
		cmd.Dir = mnt
		want, err := cmd.Output()
		if err != nil {
			t.Fatalf("getfacl %v: %v", opts, err)
		}
		args := append([]string{"getfacl"}, opts...)
		for _, f := range files {
			args = append(args, img+":"+f)
		}
		if got := ok(t, args...); got != string(want) {
			t.Errorf("getfacl %v differs:\ngetfacl(1):\n%s\ngobtrfs:\n%s", opts, want, got)
		}
	}
	btrfstest.Unmount(t, mnt)
	if _, stderr, code := run(t, "setfacl", "-d", "-m", "u:bin:r", img+":/f"); code != 1 || !strings.Contains(stderr, "Only directories can have default ACLs") {
		t.Errorf("default ACL on a file: exit %d, %q", code, stderr)
	}
	if _, stderr, code := run(t, "setfacl", "-m", "q:bin:r", img+":/f"); code != 2 || !strings.Contains(stderr, "malformed ACL entry") {
		t.Errorf("bad spec: exit %d, %q", code, stderr)
	}
}
