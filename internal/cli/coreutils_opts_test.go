package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// Tests of the coreutils options people type out of habit (chmod -R,
// ln -sf, cp -n, ls -lh, ...), each against what coreutils does.

// statOf opens img read-only and returns the stat of p.
func statOf(t *testing.T, img, p string) *btrfs.Stat {
	t.Helper()
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	fi, err := fsys.Lstat(p)
	if err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	return fi.Sys().(*btrfs.Stat)
}

func readImageLink(t *testing.T, img, p string) string {
	t.Helper()
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	target, err := fsys.ReadLink(p)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func TestChmodChownRecursive(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	mustRun(t, ExitOK, "mkdir", "-p", at("d/e"))
	mustRun(t, ExitOK, "touch", at("d/f"), at("d/e/g"), at("top"))
	mustRun(t, ExitOK, "chmod", "600", at("top"))
	mustRun(t, ExitOK, "ln", "-s", "/top", at("d/link"))
	mustRun(t, ExitOK, "chmod", "-R", "go-rx", at("d"))
	mustRun(t, ExitOK, "chown", "-R", "7:8", at("d"))
	// -w is a mode even though chmod now has options, as chmod(1) reads it.
	mustRun(t, ExitOK, "chmod", "-R", "-w", at("d/e"))
	for p, want := range map[string]uint32{"d": 0o40700, "d/f": 0o100600, "d/e": 0o40500, "d/e/g": 0o100400, "top": 0o100600} {
		st := statOf(t, img, p)
		if st.Mode != want {
			t.Errorf("%s: mode %o, want %o", p, st.Mode, want)
		}
		if wantUID := map[bool]uint32{true: 7, false: 0}[p != "top"]; st.UID != wantUID || (p != "top" && st.GID != 8) {
			t.Errorf("%s: owner %d:%d", p, st.UID, st.GID)
		}
	}
	// chown -R changes a link met on the way itself (as chown -R -P).
	if st := statOf(t, img, "d/link"); st.UID != 7 || st.Mode&0o777 != 0o777 {
		t.Errorf("d/link: owner %d mode %o; want 7 and 777 (chmod -R leaves links alone)", st.UID, st.Mode)
	}
	mustRun(t, ExitOK, "chown", "-h", "9", at("d/link"))
	if st := statOf(t, img, "d/link"); st.UID != 9 {
		t.Errorf("chown -h: owner %d, want 9", st.UID)
	}
}

func TestLnForceAndNoDereference(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	mustRun(t, ExitOK, "mkdir", at("dir"))
	mustRun(t, ExitOK, "touch", at("file"))
	mustRun(t, ExitOK, "ln", "-s", "one", at("l"))
	mustRun(t, ExitFailure, "ln", "-s", "two", at("l"))
	mustRun(t, ExitOK, "ln", "-sf", "two", at("l"))
	if got := readImageLink(t, img, "l"); got != "two" {
		t.Errorf("ln -sf: target %q, want two", got)
	}
	mustRun(t, ExitOK, "ln", "-f", at("file"), at("l")) // a hard link replaces the symlink
	if st := statOf(t, img, "l"); st.Nlink != 2 || st.Mode&0o170000 != 0o100000 {
		t.Errorf("ln -f: l is mode %o nlink %d, want a second name of file", st.Mode, st.Nlink)
	}
	// A link to a directory: without -n the new link goes inside; with
	// -n (and -f) the link itself is replaced, as ln -sfn does.
	mustRun(t, ExitOK, "ln", "-s", "dir", at("dl"))
	mustRun(t, ExitOK, "ln", "-sf", "x", at("dl"))
	if got := readImageLink(t, img, "dir/x"); got != "x" {
		t.Errorf("ln -sf into a link to a directory: %q", got)
	}
	mustRun(t, ExitOK, "ln", "-sfn", "elsewhere", at("dl"))
	if got := readImageLink(t, img, "dl"); got != "elsewhere" {
		t.Errorf("ln -sfn: target %q, want elsewhere", got)
	}
	_, stderr, code := run(t, "ln", "-sf", "x", at("dir"), at("y"))
	if code != ExitUsage {
		t.Errorf("ln with three operands: exit %d, %s", code, stderr)
	}
}

func TestMvForceNoClobberVerbose(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	mustRun(t, ExitOK, "write", at("a"), "A")
	mustRun(t, ExitOK, "write", at("b"), "B")
	mustRun(t, ExitOK, "mv", "-n", at("a"), at("b"))
	if got := catImage(t, img, "b"); got != "B" {
		t.Errorf("mv -n replaced b: %q", got)
	}
	// The last of -n and -f wins, as in mv(1).
	out := mustRun(t, ExitOK, "mv", "-n", "-f", "-v", at("a"), at("b"))
	if got := catImage(t, img, "b"); got != "A" {
		t.Errorf("mv -f: b is %q, want A", got)
	}
	if want := "renamed '" + img + ":/a' -> '" + img + ":/b'\n"; out != want {
		t.Errorf("mv -v printed %q, want %q", out, want)
	}
}

func catImage(t *testing.T, img, p string) string {
	t.Helper()
	out, stderr, code := run(t, "cat", img+":"+p)
	if code != ExitOK {
		t.Fatalf("cat %s: exit %d: %s", p, code, stderr)
	}
	return out
}

func TestCpNoClobberVerbose(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	host := t.TempDir()
	src := filepath.Join(host, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("new"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "g"), []byte("new"), 0o644)
	mustRun(t, ExitOK, "mkdir", "-p", at("dst/sub"))
	mustRun(t, ExitOK, "write", at("dst/f"), "old")
	mustRun(t, ExitOK, "cp", "-n", filepath.Join(src, "f"), at("dst/f"))
	if got := catImage(t, img, "dst/f"); got != "old" {
		t.Errorf("cp -n replaced a file: %q", got)
	}
	// cp -rn merges: new files come, existing ones stay.
	out := mustRun(t, ExitOK, "cp", "-rnv", src+"/.", at("dst"))
	if got := catImage(t, img, "dst/f"); got != "old" {
		t.Errorf("cp -rn replaced a file: %q", got)
	}
	if got := catImage(t, img, "dst/sub/g"); got != "new" {
		t.Errorf("cp -rn did not copy a new file: %q", got)
	}
	// As cp -v: the directories merged into (dst, dst/sub) say nothing.
	want := "'" + src + "/./sub/g' -> '" + img + ":/dst/sub/g'\n"
	if out != want {
		t.Errorf("cp -rnv printed\n%s\nwant\n%s", out, want)
	}
	// Compare the wording with cp(1) itself.
	hostDst := filepath.Join(host, "hostdst")
	real, err := exec.Command("cp", "-v", filepath.Join(src, "f"), hostDst).Output()
	if err == nil {
		out := mustRun(t, ExitOK, "cp", "-v", filepath.Join(src, "f"), at("copy"))
		if strings.Replace(string(real), hostDst, img+":/copy", 1) != out {
			t.Errorf("cp -v printed %q; cp(1) prints %q", out, real)
		}
	}
}

// TestCpDotCopiesContents checks that SRC/. copies what is in SRC into
// DEST, in both directions, as cp -a SRC/. DEST does.
func TestCpDotCopiesContents(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	host := t.TempDir()
	src := filepath.Join(host, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	mustRun(t, ExitOK, "mkdir", at("dest"))
	mustRun(t, ExitOK, "cp", "-a", src+"/.", at("dest"))
	mustRun(t, ExitOK, "cp", "-a", src+"/.", at("fresh")) // a new DEST is the copy of SRC
	for _, p := range []string{"dest/f", "dest/sub", "fresh/f", "fresh/sub"} {
		statOf(t, img, p)
	}
	if _, err := os.Stat(filepath.Join(host, "src")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(host, "out")
	os.Mkdir(out, 0o755)
	mustRun(t, ExitOK, "cp", "-a", at("dest/."), out)
	for _, p := range []string{"f", "sub"} {
		if _, err := os.Lstat(filepath.Join(out, p)); err != nil {
			t.Errorf("cp -a IMAGE:/dest/. out: %v", err)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "dest")); err == nil {
		t.Errorf("cp -a IMAGE:/dest/. out made out/dest")
	}
}

func TestRmVerbose(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	mustRun(t, ExitOK, "mkdir", "-p", at("d/e"))
	mustRun(t, ExitOK, "touch", at("d/e/f"), at("g"))
	out := mustRun(t, ExitOK, "rm", "-rv", at("d"), at("g"))
	want := "removed '" + img + ":/d/e/f'\nremoved directory '" + img + ":/d/e'\nremoved directory '" +
		img + ":/d'\nremoved '" + img + ":/g'\n"
	if out != want {
		t.Errorf("rm -rv printed\n%s\nwant\n%s", out, want)
	}
}

func TestTouchReferenceAndNoDereference(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	mustRun(t, ExitOK, "touch", "-d", "2001-02-03 04:05:06.5", at("ref"))
	mustRun(t, ExitOK, "ln", "-s", "ref", at("link"))
	mustRun(t, ExitOK, "touch", "-r", at("link"), at("new"))
	want := time.Date(2001, 2, 3, 4, 5, 6, 5e8, time.UTC)
	if st := statOf(t, img, "new"); !st.Mtime.Equal(want) || !st.Atime.Equal(want) {
		t.Errorf("touch -r: times %v %v, want %v", st.Atime, st.Mtime, want)
	}
	mustRun(t, ExitOK, "touch", "-h", "-d", "@0", at("link"))
	if st := statOf(t, img, "link"); st.Mtime.Unix() != 0 {
		t.Errorf("touch -h: link mtime %v", st.Mtime)
	}
	if st := statOf(t, img, "ref"); !st.Mtime.Equal(want) {
		t.Errorf("touch -h changed the target: %v", st.Mtime)
	}
	mustRun(t, ExitFailure, "touch", "-h", at("missing")) // -h makes nothing
	mustRun(t, ExitUsage, "touch", "-r", at("ref"), "-d", "@0", at("new"))
}

// TestLsFormatsAsCoreutils lists an image with gobtrfs and, mounted, with
// ls(1), and wants the same text.
func TestLsFormatsAsCoreutils(t *testing.T) {
	btrfstest.RequireProgs(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "sub", "deeper"), 0o755)
	os.WriteFile(filepath.Join(root, "small"), []byte("hi\n"), 0o644)
	os.WriteFile(filepath.Join(root, "big"), make([]byte, 3<<20+17), 0o600)
	os.WriteFile(filepath.Join(root, "sub", "f"), make([]byte, 70000), 0o644)
	os.WriteFile(filepath.Join(root, ".hidden"), nil, 0o644)
	os.Symlink("small", filepath.Join(root, "link"))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{RootDir: root})
	mnt := btrfstest.Mount(t, "ro", img)
	for _, flags := range [][]string{
		{"-1"}, {"-1", "-i", "-s", "-h"}, {"-s"}, {"-A", "-i"}, {"-lh"}, {"-ln"}, {"-ln", "--full-time"},
		{"-lR"}, {"-d"}, {"-ld"}, {"-lis"},
	} {
		cmd := exec.Command("ls", append(flags, ".")...)
		cmd.Dir = mnt
		want, err := cmd.Output()
		if err != nil {
			t.Fatalf("ls %v: %v", flags, err)
		}
		got := mustRun(t, ExitOK, append(append([]string{"ls"}, flags...), img)...)
		// ls(1) names the directory "." where gobtrfs says "/"; -l shows
		// owner names unless -n, gobtrfs always numbers.
		w := strings.ReplaceAll(string(want), "./", "/")
		w = strings.ReplaceAll(w, ".:\n", "/:\n")
		if flags[0] == "-d" || flags[0] == "-ld" {
			w = strings.Replace(w, " .\n", " /\n", 1)
			if w == ".\n" {
				w = "/\n"
			}
		}
		w = strings.ReplaceAll(w, " root root ", " 0 0 ")
		if got != w {
			t.Errorf("ls %v:\n%s\nls(1):\n%s", flags, got, w)
		}
	}
	// -a adds "." and ".."; ".." of the top is the top.
	if got := mustRun(t, ExitOK, "ls", "-ai", img); !strings.HasPrefix(strings.ReplaceAll(got, " ", ""), "256.\n256..\n") {
		t.Errorf("ls -ai IMAGE:\n%s", got)
	}
	// Several operands: files first, then each directory under a header.
	got := mustRun(t, ExitOK, "ls", img+":/sub", img+":/small", img+":/")
	want := "/small\n\n/:\nbig\nlink\nsmall\nsub\n\n/sub:\ndeeper\nf\n"
	if got != want {
		t.Errorf("ls with three operands:\n%s\nwant\n%s", got, want)
	}
}
