package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// mustRun runs the gobtrfs command line and fails the test unless it exits
// with want.
func mustRun(t *testing.T, want int, args ...string) string {
	t.Helper()
	out, stderr, code := run(t, args...)
	if code != want {
		t.Fatalf("%q: exit %d, want %d\n%s%s", args, code, want, out, stderr)
	}
	return out
}

// entryCheck is one expectation about a path of a scanned tree.
type entryCheck struct {
	path string
	typ  btrfstest.FileType // 0: the path must be absent
	perm uint32
	// Optional facts, checked when set.
	mtime  time.Time
	uid    int // -1: any
	gid    int
	target string
	xattrs map[string]string
	rdev   [2]uint32
}

// checkTree compares a kernel scan with the expectations.
func checkTree(t *testing.T, tree *btrfstest.Tree, checks []entryCheck) {
	t.Helper()
	for _, c := range checks {
		e := tree.Entries[c.path]
		if c.typ == 0 {
			if e != nil {
				t.Errorf("%s: exists (%v), want it absent", c.path, e.Type)
			}
			continue
		}
		if e == nil {
			t.Errorf("%s: missing", c.path)
			continue
		}
		var bad []string
		if e.Type != c.typ || e.Perm != c.perm {
			bad = append(bad, fmt.Sprintf("type %v perm %o, want %v %o", e.Type, e.Perm, c.typ, c.perm))
		}
		if !c.mtime.IsZero() && e.MtimeNs != c.mtime.UnixNano() {
			bad = append(bad, fmt.Sprintf("mtime %v, want %v", time.Unix(0, e.MtimeNs).UTC(), c.mtime))
		}
		if c.uid >= 0 && (int(e.UID) != c.uid || int(e.GID) != c.gid) {
			bad = append(bad, fmt.Sprintf("owner %d:%d, want %d:%d", e.UID, e.GID, c.uid, c.gid))
		}
		if e.Target != c.target {
			bad = append(bad, fmt.Sprintf("target %q, want %q", e.Target, c.target))
		}
		if fmt.Sprint(e.Xattrs) != fmt.Sprint(c.xattrs) && (len(e.Xattrs) > 0 || len(c.xattrs) > 0) {
			bad = append(bad, fmt.Sprintf("xattrs %q, want %q", e.Xattrs, c.xattrs))
		}
		if e.RdevMajor != c.rdev[0] || e.RdevMinor != c.rdev[1] {
			bad = append(bad, fmt.Sprintf("rdev %d,%d, want %d,%d", e.RdevMajor, e.RdevMinor, c.rdev[0], c.rdev[1]))
		}
		if len(bad) > 0 {
			t.Errorf("%s: %s", c.path, strings.Join(bad, "; "))
		}
	}
}

// scanMounted checks the image with btrfs check, mounts it read-only and
// scans it.
func scanMounted(t *testing.T, img string) (string, *btrfstest.Tree) {
	t.Helper()
	btrfstest.Check(t, []string{img}, false)
	mnt := btrfstest.Mount(t, "ro", img)
	tree, err := btrfstest.Scan(mnt)
	if err != nil {
		t.Fatal(err)
	}
	return mnt, tree
}

func TestCmdEditingCommands(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	d1 := time.Date(2021, 2, 3, 4, 5, 6, 700000000, time.UTC)
	mustRun(t, ExitOK, "mkdir", at("a"), at("/a/b"), at("gone"), at("rmme"))
	mustRun(t, ExitOK, "mkdir", "-m", "u=rwx,g=rx", at("p"))
	mustRun(t, ExitOK, "touch", "-d", "2021-02-03 04:05:06.7", at("a/f"), at("a/b/g"), at("a/h"))
	mustRun(t, ExitOK, "touch", "-c", at("a/not-made"))
	mustRun(t, ExitOK, "chmod", "u+s,go-r", at("a/f"))
	mustRun(t, ExitOK, "chmod", "0600", at("a/h"), at("a/b/g"))
	mustRun(t, ExitOK, "chmod", "-w", at("a/b/g"))
	mustRun(t, ExitOK, "setfattr", "-n", "user.bin", "-v", "0x00ff", at("a/f"), at("a"))
	mustRun(t, ExitOK, "setfattr", "-n", "user.text", "-v", `"one\012two"`, at("a/f"))
	mustRun(t, ExitOK, "setfattr", "-n", "user.empty", at("a/f"))
	mustRun(t, ExitOK, "setfattr", "-n", "user.b64", "-v", "0saGVsbG8=", at("a/b"))
	mustRun(t, ExitOK, "touch", at("odd\\name\nx"))
	mustRun(t, ExitOK, "setfattr", "-n", "user.e=q\\r\n", "-v", "0x0a", at("odd\\name\nx"))
	mustRun(t, ExitOK, "rmdir", at("gone"))
	mustRun(t, ExitOK, "rm", at("a/h"))
	mustRun(t, ExitOK, "rm", "-f", at("a/nosuch"))

	// Usage errors (exit 2) and failures (exit 1) commit nothing.
	mustRun(t, ExitUsage, "mkdir")
	mustRun(t, ExitUsage, "mkdir", "not-an-image-path")
	mustRun(t, ExitUsage, "chmod", "u+q", at("a"))
	other := filepath.Join(t.TempDir(), "other.img")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ExitUsage, "mkdir", at("x1"), other+":x2")
	mustRun(t, ExitUsage, "touch", "--nope", at("x1"))
	mustRun(t, ExitFailure, "mkdir", at("x1"), at("nosuch/x"))
	mustRun(t, ExitFailure, "touch", at("x1"), at("a/f/x"))
	mustRun(t, ExitFailure, "rmdir", at("rmme"), at("a"))
	mustRun(t, ExitFailure, "rmdir", at("a/f"))
	mustRun(t, ExitFailure, "rm", at("a/b"))
	mustRun(t, ExitFailure, "rm", at("a/nosuch"))
	mustRun(t, ExitFailure, "mkdir", "/nonexistent/img:x")

	mnt, tree := scanMounted(t, img)
	checkTree(t, tree, []entryCheck{
		{path: "a", typ: btrfstest.TypeDir, perm: 0o755, uid: 0, xattrs: map[string]string{"user.bin": "\x00\xff"}},
		{path: "a/b", typ: btrfstest.TypeDir, perm: 0o755, uid: 0, xattrs: map[string]string{"user.b64": "hello"}},
		{path: "p", typ: btrfstest.TypeDir, perm: 0o757, uid: 0}, // from 777, as mkdir(1)
		{path: "a/f", typ: btrfstest.TypeRegular, perm: 0o4600, mtime: d1, uid: 0,
			xattrs: map[string]string{"user.bin": "\x00\xff", "user.text": "one\ntwo", "user.empty": ""}},
		{path: "a/b/g", typ: btrfstest.TypeRegular, perm: 0o400, mtime: d1, uid: 0},
		{path: "rmme", typ: btrfstest.TypeDir, perm: 0o755, uid: 0},
		{path: "a/h"}, {path: "gone"}, {path: "a/not-made"}, {path: "x1"},
	})
	compareGetfattr(t, mnt, img, [][]string{
		{"a/f"},
		{"-d", "a/f", "a", "a/b", "rmme"},
		{"-d", "-e", "hex", "a/f"},
		{"-d", "-e", "base64", "a/f", "a/b"},
		{"-d", "-e", "text", "a/f"},
		{"-n", "user.text", "a/f"},
		{"-d", "-m", "t", "a/f"},
		{"-d", "-m", "-", "a/f"},
		{"--dump", "--match=^user\\.b", "a/f", "a/b"},
		{"-d", "odd\\name\nx"},
		{"-d", "-e", "text", "odd\\name\nx"},
	})
	out, stderr, code := run(t, "getfattr", "-n", "user.nosuch", at("a/f"))
	if code != ExitFailure || out != "" || !strings.Contains(stderr, "a/f: user.nosuch: No such attribute") {
		t.Errorf("getfattr of a missing attribute: exit %d, %q %q", code, out, stderr)
	}
	out = mustRun(t, ExitOK, "getfattr", "--json", "-d", "-e", "hex", at("a/b"))
	if want := `"name": "user.b64",` + "\n" + `        "value": "0x68656c6c6f"`; !strings.Contains(out, want) {
		t.Errorf("getfattr --json:\n%s\nwant it to hold %s", out, want)
	}
	var js []struct {
		File   string
		Xattrs []struct{ Name, Value *string }
	}
	out = mustRun(t, ExitOK, "getfattr", "--json", "-d", at("a/f"), at("rmme"))
	if err := json.Unmarshal([]byte(out), &js); err != nil || len(js) != 2 || js[0].File != "a/f" ||
		len(js[0].Xattrs) != 3 || *js[0].Xattrs[1].Name != "user.empty" || *js[0].Xattrs[1].Value != "" ||
		*js[0].Xattrs[2].Value != "0sb25lCnR3bw==" || len(js[1].Xattrs) != 0 {
		t.Errorf("getfattr --json -d: %v\n%s", err, out)
	}
}

// compareGetfattr runs attr's getfattr in the mounted filesystem and ours
// on the image with the same arguments, and wants the same bytes.
func compareGetfattr(t *testing.T, mnt, img string, argLists [][]string) {
	t.Helper()
	if _, err := exec.LookPath("getfattr"); err != nil {
		t.Logf("no getfattr on this host: output not compared")
		return
	}
	for _, args := range argLists {
		cmd := exec.Command("getfattr", args...)
		cmd.Dir = mnt
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		want, err := cmd.Output()
		if err != nil {
			t.Errorf("getfattr %q: %v\n%s", args, err, stderr.String())
			continue
		}
		ours := append([]string{"getfattr"}, args...)
		for i, a := range ours[1:] {
			if !strings.HasPrefix(a, "-") && (i == 0 || !isOptWithValue(ours[i])) {
				ours[i+1] = img + ":" + a
			}
		}
		got, gotErr, code := run(t, ours...)
		if code != ExitOK || got != string(want) {
			t.Errorf("getfattr %q: exit %d %s\n%s", args, code, gotErr, btrfstest.LineDiff(string(want), got))
		}
	}
}

func isOptWithValue(a string) bool {
	return a == "-e" || a == "-n" || a == "-m"
}

// TestCmdLinksMovesNodesOwners covers mv, ln, mknod, chown, setfattr -x,
// mkdir -p and rm -r.
func TestCmdLinksMovesNodesOwners(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	mustRun(t, ExitOK, "mkdir", "-p", at("d/e/f"), at("t/u"), at("d"))
	mustRun(t, ExitOK, "mkdir", "-p", "-m", "700", at("d/e/f"), at("m/n"))
	mustRun(t, ExitOK, "touch", "-d", "@1000000000", at("d/file"), at("one"), at("two"), at("three"))
	mustRun(t, ExitOK, "ln", at("d/file"), at("hard"))
	mustRun(t, ExitOK, "ln", at("d/file"), at("t"))
	mustRun(t, ExitOK, "ln", "-s", "../d/file", at("t/sym"))
	mustRun(t, ExitOK, "ln", "-s", "/no where", at("dangling"))
	mustRun(t, ExitOK, "mknod", at("fifo"), "p")
	mustRun(t, ExitOK, "mknod", "-m", "600", at("blk"), "b", "8", "1")
	mustRun(t, ExitOK, "mknod", at("chr"), "c", "4", "64")
	mustRun(t, ExitOK, "mv", at("one"), at("uno"))
	mustRun(t, ExitOK, "mv", at("two"), at("three"), at("t/u"))
	mustRun(t, ExitOK, "chown", "123:456", at("uno"))
	mustRun(t, ExitOK, "chown", ":789", at("t/sym"))
	mustRun(t, ExitOK, "chown", "0", at("t/sym"))
	mustRun(t, ExitOK, "setfattr", "-n", "user.a", "-v", "1", at("uno"))
	mustRun(t, ExitOK, "setfattr", "-n", "user.b", "-v", "2", at("uno"))
	mustRun(t, ExitOK, "setfattr", "-x", "user.a", at("uno"))
	mustRun(t, ExitOK, "chmod", "g+w", at("t/sym")) // follows the link
	mustRun(t, ExitOK, "rm", "-r", at("d/e"))
	mustRun(t, ExitUsage, "mknod", at("x"), "q")
	mustRun(t, ExitUsage, "mknod", at("x"), "b", "1")
	mustRun(t, ExitFailure, "mv", at("uno"), at("hard"), at("nosuchdir"))

	mnt, tree := scanMounted(t, img)
	d0 := time.Unix(1000000000, 0)
	checkTree(t, tree, []entryCheck{
		{path: "d", typ: btrfstest.TypeDir, perm: 0o755, uid: -1},
		{path: "d/e"},
		{path: "m", typ: btrfstest.TypeDir, perm: 0o755, uid: -1},
		{path: "m/n", typ: btrfstest.TypeDir, perm: 0o700, uid: -1},
		{path: "d/file", typ: btrfstest.TypeRegular, perm: 0o664, mtime: d0, uid: -1},
		{path: "hard", typ: btrfstest.TypeRegular, perm: 0o664, mtime: d0, uid: -1},
		{path: "t/file", typ: btrfstest.TypeRegular, perm: 0o664, mtime: d0, uid: -1},
		{path: "t/sym", typ: btrfstest.TypeSymlink, perm: 0o777, uid: 0, gid: 789, target: "../d/file"},
		{path: "dangling", typ: btrfstest.TypeSymlink, perm: 0o777, uid: -1, target: "/no where"},
		{path: "fifo", typ: btrfstest.TypeFifo, perm: 0o644, uid: -1},
		{path: "blk", typ: btrfstest.TypeBlockDev, perm: 0o600, uid: -1, rdev: [2]uint32{8, 1}},
		{path: "chr", typ: btrfstest.TypeCharDev, perm: 0o644, uid: -1, rdev: [2]uint32{4, 64}},
		{path: "one"}, {path: "two"}, {path: "three"},
		{path: "uno", typ: btrfstest.TypeRegular, perm: 0o644, uid: 123, gid: 456, xattrs: map[string]string{"user.b": "2"}},
		{path: "t/u/two", typ: btrfstest.TypeRegular, perm: 0o644, uid: -1},
		{path: "t/u/three", typ: btrfstest.TypeRegular, perm: 0o644, uid: -1},
	})
	if len(tree.Links) != 1 || strings.Join(tree.Links[0], " ") != "d/file hard t/file" {
		t.Errorf("hard links: %q", tree.Links)
	}
	compareGetfattr(t, mnt, img, [][]string{{"-d", "uno", "t/sym"}, {"-h", "-d", "t/sym", "uno"}})
}
