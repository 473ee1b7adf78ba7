package cli

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// writeSparseFile makes a file of data, a hole and data: more than the
// 1 MiB that mkfs writes in one piece, so the copy streams.
func writeSparseFile(t *testing.T, p string, seed int64) {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	a, b := make([]byte, 3<<20+123), make([]byte, 1<<20)
	r.Read(a)
	r.Read(b)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []struct {
		off  int64
		data []byte
	}{{0, a}, {6 << 20, b}} {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(9 << 20); err != nil {
		t.Fatal(err)
	}
}

// scanDir scans a host directory and fails the test on error.
func scanDir(t *testing.T, dir string) *btrfstest.Tree {
	t.Helper()
	tree, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func reportDiff(t *testing.T, what string, diff []string) {
	t.Helper()
	if len(diff) > 0 {
		t.Errorf("%s:\n%s", what, strings.Join(diff, "\n"))
	}
}

func TestCpArchiveIntoImage(t *testing.T) {
	img := editImage(t)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	btrfstest.PopulateFixture(t, src, 11, false)
	writeSparseFile(t, filepath.Join(src, "big"), 11)
	when := time.Date(2019, 1, 2, 3, 4, 5, 123456789, time.UTC)
	if err := os.Chtimes(filepath.Join(src, "big"), when, when); err != nil {
		t.Fatal(err)
	}
	want := scanDir(t, src)

	mustRun(t, ExitOK, "cp", "-a", src, img+":/")
	mustRun(t, ExitOK, "mkdir", img+":/d")
	mustRun(t, ExitOK, "cp", "-a", filepath.Join(src, "regular"), filepath.Join(src, "a"), img+":/d")
	// Copying again merges into the existing tree, replacing files.
	mustRun(t, ExitOK, "cp", "-a", src, img+":/")
	// Failures commit nothing: the second source does not exist.
	mustRun(t, ExitFailure, "cp", "-a", filepath.Join(src, "a"), filepath.Join(src, "nosuch"), img+":/")
	mustRun(t, ExitUsage, "cp", "-a", src)

	btrfstest.Check(t, []string{img}, true)
	mnt := btrfstest.Mount(t, "ro", img)
	got := scanDir(t, mnt)
	reportDiff(t, "cp -a tree", btrfstest.Diff(want, got.Sub("src"), btrfstest.DiffOptions{CompareNlink: true}))
	reportDiff(t, "cp -a into a directory", btrfstest.Diff(want.Sub("a"), got.Sub("d/a"), btrfstest.DiffOptions{}))
	if e, w := got.Entries["d/regular"], want.Entries["regular"]; e == nil || e.SHA256 != w.SHA256 || e.MtimeNs != w.MtimeNs {
		t.Errorf("d/regular: %+v, want like %+v", e, w)
	}
	if got.Entries["a"] != nil {
		t.Errorf("a: made by a failed cp")
	}
}

func TestCpPlainIntoImage(t *testing.T) {
	img := editImage(t)
	umask := processUmask()
	src := filepath.Join(t.TempDir(), "src")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	must(unix.Chmod(filepath.Join(src, "sub"), 0o2777))
	must(os.WriteFile(filepath.Join(src, "f"), []byte("contents of f\n"), 0o644))
	must(os.Lchown(filepath.Join(src, "f"), 1000, 1001)) // before chmod: chown clears set-id bits
	must(unix.Chmod(filepath.Join(src, "f"), 0o4775))
	must(unix.Lsetxattr(filepath.Join(src, "f"), "user.x", []byte("y"), 0))
	must(os.Link(filepath.Join(src, "f"), filepath.Join(src, "sub", "h")))
	must(os.Symlink("../f", filepath.Join(src, "sub", "l")))
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	must(os.Chtimes(filepath.Join(src, "f"), old, old))
	writeSparseFile(t, filepath.Join(src, "big"), 5)
	must(os.Symlink("f", filepath.Join(src, "tof")))
	want := scanDir(t, src)

	start := time.Now()
	mustRun(t, ExitOK, "cp", "-r", src, img+":/r")
	mustRun(t, ExitOK, "cp", filepath.Join(src, "big"), img+":/single")
	mustRun(t, ExitOK, "cp", filepath.Join(src, "tof"), img+":/followed")
	mustRun(t, ExitOK, "cp", "-p", filepath.Join(src, "f"), img+":/kept")
	mustRun(t, ExitOK, "mkdir", img+":/into")
	mustRun(t, ExitOK, "cp", filepath.Join(src, "f"), filepath.Join(src, "big"), img+":/into")
	// Replacing an existing file.
	other := filepath.Join(t.TempDir(), "other")
	must(os.WriteFile(other, []byte("new"), 0o600))
	mustRun(t, ExitOK, "cp", other, img+":/single")
	mustRun(t, ExitFailure, "cp", src, img+":/nodir")                                 // no -r
	mustRun(t, ExitFailure, "cp", filepath.Join(src, "f"), other, img+":/nosuchdir")  // several into a non-dir
	mustRun(t, ExitFailure, "cp", "-r", filepath.Join(src, "f"), src, img+":/into/f") // not a directory
	mustRun(t, ExitFailure, "cp", other, filepath.Join(src, "nosuch"), img+":/r")     // r/other is dropped
	end := time.Now()

	btrfstest.Check(t, []string{img}, true)
	mnt := btrfstest.Mount(t, "ro", img)
	got := scanDir(t, mnt)
	perm := func(p uint32) uint32 { return p &^ umask &^ 0o6000 }
	for _, c := range []struct {
		path, from string
		perm       uint32
	}{
		{"r", ".", perm(0o755)}, {"r/f", "f", perm(0o4775)}, {"r/sub", "sub", perm(0o2777)},
		{"r/sub/h", "sub/h", perm(0o4775)}, {"r/big", "big", perm(0o644)}, {"r/sub/l", "sub/l", 0o777},
		{"single", "", perm(0o600)}, {"into/f", "f", perm(0o4775)}, {"into/big", "big", perm(0o644)},
		{"followed", "f", perm(0o4775)}, {"r/tof", "tof", 0o777},
	} {
		e := got.Entries[c.path]
		if e == nil {
			t.Errorf("%s: missing", c.path)
			continue
		}
		if e.Perm != c.perm || e.UID != 0 || e.GID != 0 || len(e.Xattrs) != 0 || e.Nlink > 1 && e.Type != btrfstest.TypeDir {
			t.Errorf("%s: perm %o owner %d:%d xattrs %v nlink %d, want perm %o, root, none, 1", c.path, e.Perm, e.UID, e.GID, e.Xattrs, e.Nlink, c.perm)
		}
		if mt := time.Unix(0, e.MtimeNs); mt.Before(start.Add(-time.Second)) || mt.After(end.Add(time.Second)) {
			t.Errorf("%s: mtime %v, want the time of the copy", c.path, mt)
		}
		if c.from == "" {
			continue
		}
		w := want.Entries[c.from]
		if e.Type != w.Type || e.SHA256 != w.SHA256 || e.Size != w.Size && e.Type != btrfstest.TypeDir ||
			e.Target != w.Target || !sameRanges(e.Data, w.Data) {
			t.Errorf("%s: %+v, want the contents of %+v", c.path, e, w)
		}
	}
	if e := got.Entries["kept"]; e == nil || e.Perm != 0o4775 || e.UID != 1000 || e.GID != 1001 || !time.Unix(0, e.MtimeNs).Equal(old) || len(e.Xattrs) != 0 {
		t.Errorf("cp -p: %+v", e)
	}
	if e := got.Entries["single"]; e == nil || e.Size != 3 {
		t.Errorf("single: %+v, want the replacing 3-byte file", e)
	}
	for _, p := range []string{"nodir", "nosuchdir", "r/other"} {
		if got.Entries[p] != nil {
			t.Errorf("%s: made by a failed cp", p)
		}
	}
}

// sameRanges compares two data maps, both from the kernel at 4 KiB
// granularity.
func sameRanges(a, b []btrfstest.Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCpOutOfImage(t *testing.T) {
	btrfstest.RequireProgs(t)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	btrfstest.PopulateFixture(t, src, 3, false)
	writeSparseFile(t, filepath.Join(src, "big"), 3)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{RootDir: src})
	mnt := btrfstest.Mount(t, "ro", img)
	want := scanDir(t, mnt)

	dst := t.TempDir()
	at := func(p string) string { return img + ":" + p }
	start := time.Now()
	mustRun(t, ExitOK, "cp", "-a", at("/"), filepath.Join(dst, "all"))
	mustRun(t, ExitOK, "cp", "-a", at("a"), at("b"), dst)
	mustRun(t, ExitOK, "cp", at("big"), filepath.Join(dst, "big-copy"))
	mustRun(t, ExitOK, "cp", "-p", at("setuid"), filepath.Join(dst, "setuid-p"))
	mustRun(t, ExitOK, "cp", "-r", at("a"), filepath.Join(dst, "a-plain"))
	mustRun(t, ExitFailure, "cp", at("a"), filepath.Join(dst, "no-r"))
	mustRun(t, ExitFailure, "cp", at("big"), at("regular"), filepath.Join(dst, "nosuchdir"))
	mustRun(t, ExitFailure, "cp", at("nosuch"), dst)

	got := scanDir(t, dst)
	reportDiff(t, "cp -a IMAGE:/", btrfstest.Diff(want, got.Sub("all"), btrfstest.DiffOptions{CompareNlink: true}))
	reportDiff(t, "cp -a IMAGE:a", btrfstest.Diff(want.Sub("a"), got.Sub("a"), btrfstest.DiffOptions{}))
	reportDiff(t, "cp -a IMAGE:b", btrfstest.Diff(want.Sub("b"), got.Sub("b"), btrfstest.DiffOptions{}))
	umask := processUmask()
	e, w := got.Entries["big-copy"], want.Entries["big"]
	if e == nil || e.SHA256 != w.SHA256 || e.Size != w.Size || !sameRanges(e.Data, w.Data) ||
		e.Perm != w.Perm&^umask || time.Unix(0, e.MtimeNs).Before(start.Add(-time.Second)) {
		t.Errorf("big-copy: %+v, want the contents of %+v, mode less umask, time now", e, w)
	}
	if e, w := got.Entries["setuid-p"], want.Entries["setuid"]; e == nil || e.Perm != w.Perm || e.UID != w.UID || e.MtimeNs != w.MtimeNs {
		t.Errorf("setuid-p: %+v, want like %+v", e, w)
	}
	if e := got.Entries["a-plain/linked"]; e == nil || e.SHA256 != want.Entries["a/linked"].SHA256 || len(e.Xattrs) != 0 {
		t.Errorf("a-plain/linked: %+v", e)
	}
	for _, p := range []string{"no-r", "nosuchdir", "nosuch"} {
		if got.Entries[p] != nil {
			t.Errorf("%s: made by a failed cp", p)
		}
	}
	// No scratch directory is left behind.
	for p := range got.Entries {
		if strings.Contains(p, ".gobtrfs-cp-") {
			t.Errorf("%s: scratch directory left", p)
		}
	}
}

func TestCpHelp(t *testing.T) {
	for _, c := range []string{"cp", "write", "truncate", "fallocate"} {
		out := mustRun(t, ExitOK, c, "--help")
		if !strings.Contains(out, "IMAGE:PATH") || !bytes.Contains([]byte(out), []byte("Options:")) {
			t.Errorf("%s --help:\n%s", c, out)
		}
	}
}
