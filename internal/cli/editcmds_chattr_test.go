package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestChattrLsattr runs the same chattr commands with gobtrfs on an image
// and with chattr(1) on the kernel's mount of a copy of it, and compares
// what lsattr(1) then prints on each (and the compression property), and
// gobtrfs lsattr with lsattr(1) on the same mount.
func TestChattrLsattr(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	ok(t, "mkdir", "-p", img+":/d/e")
	ok(t, "touch", img+":/f", img+":/g", img+":/d/x", img+":/d/e/y", img+":/.hidden")
	ok(t, "write", img+":/data", "some data")
	ok(t, "ln", "-s", "f", img+":/link")
	btrfstest.Check(t, []string{img}, false)
	copyImg := filepath.Join(t.TempDir(), "kernel.img")
	data, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyImg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args []string
		fail bool
	}{
		{[]string{"+C", "f"}, false},
		{[]string{"+c", "g"}, false},
		{[]string{"+i", "+d", "data"}, false},
		{[]string{"-R", "+A", "d"}, false},
		{[]string{"+m", "d/x"}, false},
		{[]string{"+C", "data"}, false}, // not empty: unchanged
		{[]string{"+c", "f"}, true},     // NOCOW and compression
		{[]string{"+s", "g"}, true},     // no such flag on btrfs
		{[]string{"+c", "link"}, true},  // a symbolic link
		{[]string{"-i", "data"}, false},
		{[]string{"+S", "-d", "+a", "data"}, false},
		{[]string{"=D", "d/e"}, false},
		{[]string{"-c", "+m", "g"}, false},
	}
	mnt := btrfstest.Mount(t, "", copyImg)
	for _, s := range steps {
		n := len(s.args) - 1
		ours := append(append([]string{"chattr"}, s.args[:n]...), img+":/"+s.args[n])
		_, stderr, code := run(t, ours...)
		kargs := append(append([]string{}, s.args[:n]...), filepath.Join(mnt, s.args[n]))
		kout, kerr := exec.Command("chattr", kargs...).CombinedOutput()
		if (code != 0) != s.fail || (kerr != nil) != s.fail {
			t.Errorf("chattr %v: gobtrfs exit %d %q, chattr(1) %v %q; want failure %v", s.args, code, stderr, kerr, kout, s.fail)
		}
	}
	kernelView := strings.ReplaceAll(progs(t, "lsattr", "-R", "-a", mnt), mnt, "X")
	kernelProps := strings.ReplaceAll(progs(t, "getfattr", "-R", "-d", "-m", "btrfs", mnt), mnt[1:], "X")
	btrfstest.Unmount(t, mnt)
	btrfstest.Check(t, []string{img}, false)

	mnt = btrfstest.Mount(t, "ro", img)
	if got := strings.ReplaceAll(progs(t, "lsattr", "-R", "-a", mnt), mnt, "X"); got != kernelView {
		t.Errorf("lsattr after gobtrfs chattr:\n%s\nafter chattr(1) on the kernel:\n%s", got, kernelView)
	}
	if got := strings.ReplaceAll(progs(t, "getfattr", "-R", "-d", "-m", "btrfs", mnt), mnt[1:], "X"); got != kernelProps {
		t.Errorf("compression properties after gobtrfs chattr:\n%s\nafter chattr(1) on the kernel:\n%s", got, kernelProps)
	}
	for _, c := range []struct {
		opts  []string
		paths []string
	}{
		{nil, []string{""}}, {[]string{"-R"}, []string{""}}, {[]string{"-a", "-R"}, []string{"/d"}},
		{[]string{"-d"}, []string{"/d", "/d/e", "/f", "/data"}}, {[]string{"-l"}, []string{"/g", "/data", "/f", "/d/x", "/d/e"}},
		{[]string{"-v", "-d"}, []string{"/data", "/f", "/"}},
	} {
		args := append([]string{"lsattr"}, c.opts...)
		pargs := append([]string{}, c.opts...)
		for _, p := range c.paths {
			args = append(args, img+":"+p)
			pargs = append(pargs, mnt+p)
		}
		ours := ok(t, args...)
		out, _ := exec.Command("lsattr", pargs...).Output() // the symbolic link is an error on the side
		if want := strings.ReplaceAll(string(out), mnt, img+":"); ours != want {
			t.Errorf("lsattr %v %v differs:\nlsattr(1) (paths mapped):\n%s\ngobtrfs:\n%s", c.opts, c.paths, want, ours)
		}
	}
	btrfstest.Unmount(t, mnt)
	if _, stderr, code := run(t, "lsattr", img+":/link"); code != 1 || !strings.Contains(stderr, "Operation not supported While reading flags on "+img+":/link") {
		t.Errorf("lsattr of a symbolic link: exit %d, %q", code, stderr)
	}
	var js []lsattrJSON
	if err := json.Unmarshal([]byte(ok(t, "lsattr", "--json", "-d", img+":/data")), &js); err != nil || len(js) != 1 ||
		js[0].Flags != "--S--a----------------" || strings.Join(js[0].Attributes, ",") != "Synchronous_Updates,Append_Only" {
		t.Errorf("lsattr --json: %+v, %v", js, err)
	}
	if _, stderr, code := run(t, "chattr", "+q", img+":/f"); code != 2 || !strings.Contains(stderr, "bad attribute letter") {
		t.Errorf("chattr +q: exit %d, %q", code, stderr)
	}
}
