//go:build linux

package btrfstest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestScanHostDir runs everywhere (any filesystem, any user): Scan records
// what was created with the standard library.
func TestScanHostDir(t *testing.T) {
	dir := t.TempDir()
	data := []byte("hello, scan")
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o750))
	must(t, os.WriteFile(filepath.Join(dir, "sub", "f"), data, 0o640))
	must(t, os.Chmod(filepath.Join(dir, "sub", "f"), 0o640))
	must(t, os.Link(filepath.Join(dir, "sub", "f"), filepath.Join(dir, "hl")))
	must(t, os.Symlink("sub/f", filepath.Join(dir, "sym")))
	must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	mtime := time.Unix(1_600_000_000, 123456789)
	must(t, os.Chtimes(filepath.Join(dir, "sub", "f"), mtime, mtime))
	xattrs := unix.Setxattr(filepath.Join(dir, "sub", "f"), "user.k", []byte("v\x00"), 0) == nil

	tr, err := btrfstest.Scan(dir)
	must(t, err)
	sum := sha256.Sum256(data)
	f := tr.Entries["sub/f"]
	switch {
	case f == nil || f.Type != btrfstest.TypeRegular:
		t.Fatalf("sub/f: %+v", f)
	case f.Perm != 0o640 || f.Size != int64(len(data)) || f.MtimeNs != mtime.UnixNano():
		t.Errorf("sub/f: perm %o size %d mtime %d", f.Perm, f.Size, f.MtimeNs)
	case f.SHA256 != hex.EncodeToString(sum[:]):
		t.Errorf("sub/f: sha256 %s", f.SHA256)
	case len(f.Data) != 1 || f.Data[0] != (btrfstest.Range{Off: 0, Len: int64(len(data))}):
		t.Errorf("sub/f: data %v", f.Data)
	case xattrs && f.Xattrs["user.k"] != "v\x00":
		t.Errorf("sub/f: xattrs %q", f.Xattrs)
	}
	if e := tr.Entries["sym"]; e == nil || e.Type != btrfstest.TypeSymlink || e.Target != "sub/f" {
		t.Errorf("sym: %+v", e)
	}
	if e := tr.Entries["fifo"]; e == nil || e.Type != btrfstest.TypeFifo {
		t.Errorf("fifo: %+v", e)
	}
	if e := tr.Entries["sub"]; e == nil || e.Type != btrfstest.TypeDir || e.Perm != 0o750 {
		t.Errorf("sub: %+v", e)
	}
	if len(tr.Links) != 1 || len(tr.Links[0]) != 2 || tr.Links[0][0] != "hl" || tr.Links[0][1] != "sub/f" {
		t.Errorf("links %q, want [[hl sub/f]]", tr.Links)
	}
	if tr.Entries["."] == nil || len(tr.Entries) != 6 {
		t.Errorf("entries %q", tr.Paths())
	}
	if _, err := btrfstest.Scan(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Scan of a missing dir: %v", err)
	}
}

// TestPopulateHostDir runs the populate parts that need no btrfs on the
// host filesystem as root: they are deterministic (two runs with one seed
// scan equal, apart from what the filesystem chooses) and a different seed
// gives different contents.
func TestPopulateHostDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (device nodes, chown, trusted.* xattrs)")
	}
	t.Parallel()
	seed := testSeed(t)
	populate := func(seed int64) *btrfstest.Tree {
		dir := t.TempDir()
		btrfstest.PopulateFiles(t, dir, seed)
		btrfstest.PopulateSpecial(t, dir, seed)
		btrfstest.PopulateNames(t, dir, seed)
		btrfstest.PopulateModes(t, dir, seed)
		must(t, os.Mkdir(dir+"/fixture", 0o755))
		btrfstest.PopulateFixture(t, dir+"/fixture", seed, false)
		tr, err := btrfstest.Scan(dir)
		must(t, err)
		return tr
	}
	a, b := populate(seed), populate(seed)
	// The root's and a fixture dir's mtimes depend on creation time.
	opts := btrfstest.DiffOptions{Filter: func(p string) bool { return p != "." && p != "fixture" }, IgnoreHoles: true}
	if d := btrfstest.Diff(a, b, opts); len(d) > 0 {
		t.Errorf("same seed, different trees:\n%q", d)
	}
	if d := btrfstest.Diff(a, populate(seed+1), opts); len(d) == 0 {
		t.Error("different seeds, same trees")
	}
}
