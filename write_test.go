package btrfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// wantEntry is what the write test expects at one path.
type wantEntry struct {
	typ    btrfstest.FileType
	perm   uint32
	mtime  time.Time // zero: not checked
	xattrs map[string]string
}

// writeOps runs the first session of changes on fsys and returns the
// model of the result.
func writeOps(t *testing.T, fsys *btrfs.FS) map[string]*wantEntry {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	atime := time.Date(2002, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []string{"a", "a/b", "a/b/c", "d", "e", "a/b/c/deep"} {
		must(fsys.Mkdir(d, 0o755))
	}
	must(fsys.CreateEmpty("a/f1", 0o644))
	must(fsys.CreateEmpty("d/f2", 0o600))
	must(fsys.CreateEmpty("top", 0o640))
	must(fsys.Setxattr("a", "user.color", []byte("blue")))
	must(fsys.Setxattr("a", "user.color", []byte("green"))) // replaces
	must(fsys.Setxattr("a/f1", "user.empty", nil))
	must(fsys.Setxattr("a/f1", "trusted.t", []byte{0, 1, 2}))
	must(fsys.Chmod("a/b", 0o700|fs.ModeSetgid))
	must(fsys.Chmod("top", 0o4755|fs.ModeSetuid))
	must(fsys.Chtimes("a/f1", atime, mtime))
	must(fsys.Remove("d/f2"))
	must(fsys.Remove("e"))
	must(fsys.Mkdir("e2", 0o711))
	return map[string]*wantEntry{
		".":          {typ: btrfstest.TypeDir, perm: 0o755},
		"a":          {typ: btrfstest.TypeDir, perm: 0o755, xattrs: map[string]string{"user.color": "green"}},
		"a/b":        {typ: btrfstest.TypeDir, perm: 0o2700},
		"a/b/c":      {typ: btrfstest.TypeDir, perm: 0o755},
		"a/b/c/deep": {typ: btrfstest.TypeDir, perm: 0o755},
		"d":          {typ: btrfstest.TypeDir, perm: 0o755},
		"e2":         {typ: btrfstest.TypeDir, perm: 0o711},
		"a/f1": {typ: btrfstest.TypeRegular, perm: 0o644, mtime: mtime,
			xattrs: map[string]string{"user.empty": "", "trusted.t": "\x00\x01\x02"}},
		"top": {typ: btrfstest.TypeRegular, perm: 0o4755},
	}
}

// writeErrors checks that failing changes report the kernel's errno.
func writeErrors(t *testing.T, fsys *btrfs.FS) {
	t.Helper()
	cases := []struct {
		name string
		run  func() error
		want error
	}{
		{"mkdir existing", func() error { return fsys.Mkdir("a", 0o755) }, syscall.EEXIST},
		{"mkdir existing file", func() error { return fsys.Mkdir("a/f1", 0o755) }, syscall.EEXIST},
		{"mkdir under missing", func() error { return fsys.Mkdir("missing/x", 0o755) }, syscall.ENOENT},
		{"mkdir under file", func() error { return fsys.Mkdir("a/f1/x", 0o755) }, syscall.ENOTDIR},
		{"mkdir root", func() error { return fsys.Mkdir(".", 0o755) }, syscall.EEXIST},
		{"mkdir long", func() error { return fsys.Mkdir(string(make([]byte, 256)), 0o755) }, syscall.ENAMETOOLONG},
		{"mkdir invalid", func() error { return fsys.Mkdir("a/../b", 0o755) }, fs.ErrInvalid},
		{"create existing", func() error { return fsys.CreateEmpty("a/f1", 0o644) }, syscall.EEXIST},
		{"remove nonempty", func() error { return fsys.Remove("a") }, syscall.ENOTEMPTY},
		{"remove missing", func() error { return fsys.Remove("a/zz") }, syscall.ENOENT},
		{"remove root", func() error { return fsys.Remove(".") }, syscall.EBUSY},
		{"chmod missing", func() error { return fsys.Chmod("nope", 0o644) }, syscall.ENOENT},
		{"setxattr missing", func() error { return fsys.Setxattr("nope", "user.x", nil) }, syscall.ENOENT},
		{"setxattr namespace", func() error { return fsys.Setxattr("a", "other.x", nil) }, syscall.EOPNOTSUPP},
		{"setxattr over 64 KiB", func() error { return fsys.Setxattr("a", "user.big", make([]byte, 1<<20)) }, syscall.E2BIG},
		{"setxattr too big for a leaf", func() error { return fsys.Setxattr("a", "user.big", make([]byte, 60<<10)) }, syscall.ENOSPC},
	}
	for _, c := range cases {
		err := c.run()
		var pe *fs.PathError
		if !errors.As(err, &pe) || !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want *fs.PathError with %v", c.name, err, c.want)
		}
	}
}

// compareScan compares a kernel mount's scan with the model.
func compareScan(t *testing.T, got *btrfstest.Tree, want map[string]*wantEntry) {
	t.Helper()
	var gotPaths, wantPaths []string
	for p := range got.Entries {
		gotPaths = append(gotPaths, p)
	}
	for p := range want {
		wantPaths = append(wantPaths, p)
	}
	sort.Strings(gotPaths)
	sort.Strings(wantPaths)
	if len(gotPaths) != len(wantPaths) {
		t.Fatalf("paths: got %v, want %v", gotPaths, wantPaths)
	}
	for p, w := range want {
		g := got.Entries[p]
		if g == nil {
			t.Fatalf("%s missing from the mount; got %v", p, gotPaths)
		}
		if g.Type != w.typ || g.Perm != w.perm {
			t.Errorf("%s: type %v perm %o, want %v %o", p, g.Type, g.Perm, w.typ, w.perm)
		}
		if !w.mtime.IsZero() && g.MtimeNs != w.mtime.UnixNano() {
			t.Errorf("%s: mtime %d, want %d", p, g.MtimeNs, w.mtime.UnixNano())
		}
		if len(g.Xattrs) != len(w.xattrs) {
			t.Errorf("%s: xattrs %q, want %q", p, g.Xattrs, w.xattrs)
		}
		for k, v := range w.xattrs {
			if g.Xattrs[k] != v {
				t.Errorf("%s: xattr %s = %q, want %q", p, k, g.Xattrs[k], v)
			}
		}
	}
}

// compareRead compares the library's read-only view with the model.
func compareRead(t *testing.T, fsys *btrfs.FS, want map[string]*wantEntry) {
	t.Helper()
	n := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n++
		w := want[p]
		if w == nil {
			t.Errorf("read view has unexpected %s", p)
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*btrfs.Stat)
		if st.Mode&0o7777 != w.perm || fi.IsDir() != (w.typ == btrfstest.TypeDir) {
			t.Errorf("%s: mode %o, want perm %o type %v", p, st.Mode, w.perm, w.typ)
		}
		if !w.mtime.IsZero() && !st.Mtime.Equal(w.mtime) {
			t.Errorf("%s: mtime %v, want %v", p, st.Mtime, w.mtime)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("read view has %d entries, want %d", n, len(want))
	}
}

func TestWriteInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := writeOps(t, fsys)
	writeErrors(t, fsys)
	compareRead(t, fsys, want) // reads see the uncommitted changes
	if v, err := fsys.Getxattr("a", "user.color"); err != nil || string(v) != "green" {
		t.Errorf("uncommitted xattr: %q %v", v, err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	compareRead(t, fsys, want) // the writable FS reads the new commit
	// Rollback drops uncommitted changes; Close then has nothing to commit.
	if err := fsys.Mkdir("dropped", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat("dropped"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat after Rollback: %v", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)

	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	compareRead(t, ro, want)
	if err := ro.Mkdir("x", 0o755); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Mkdir on a read-only FS: %v", err)
	}
	ro.Close()

	dir := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	compareScan(t, got, want)
	btrfstest.Unmount(t, dir)

	// The kernel keeps working on the result.
	dir = btrfstest.Mount(t, "", img)
	if err := os.WriteFile(filepath.Join(dir, "a/b/c/kernel.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "a/kdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "a/f1")); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, false)

	// And a second session over what the kernel wrote.
	fsys, err = btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Mkdir("a/kdir/ours", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	dir = btrfstest.Mount(t, "ro", img)
	if fi, err := os.Stat(filepath.Join(dir, "a/kdir/ours")); err != nil || fi.Mode().Perm() != 0o750 || !fi.IsDir() {
		t.Errorf("a/kdir/ours after the second session: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a/b/c/kernel.txt")); err != nil || string(b) != "hello" {
		t.Errorf("kernel.txt: %q %v", b, err)
	}
}

// TestWriteErrorsChangeNothing commits after only failing changes: the
// image must be exactly as mkfs left it, in content.
func TestWriteErrorsChangeNothing(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Mkdir("a", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.CreateEmpty("a/f1", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	writeErrors(t, fsys)
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	dir := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	compareScan(t, got, map[string]*wantEntry{
		".":    {typ: btrfstest.TypeDir, perm: 0o755},
		"a":    {typ: btrfstest.TypeDir, perm: 0o755},
		"a/f1": {typ: btrfstest.TypeRegular, perm: 0o644},
	})
}

// TestWriteManyInterop makes enough entries on 4 KiB nodes that the
// subvolume tree splits into several levels, removes every third, and
// compares the result with a kernel mount.
func TestWriteManyInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*wantEntry{".": {typ: btrfstest.TypeDir, perm: 0o755}}
	for i := 0; i < 400; i++ {
		dir := fmt.Sprintf("d%03d", i%7)
		if i < 7 {
			if err := fsys.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			want[dir] = &wantEntry{typ: btrfstest.TypeDir, perm: 0o755}
		}
		name := fmt.Sprintf("%s/file-with-a-longer-name-%04d", dir, i)
		if err := fsys.CreateEmpty(name, 0o644); err != nil {
			t.Fatal(err)
		}
		val := strings.Repeat("v", i%50)
		if err := fsys.Setxattr(name, "user.n", []byte(val)); err != nil {
			t.Fatal(err)
		}
		want[name] = &wantEntry{typ: btrfstest.TypeRegular, perm: 0o644, xattrs: map[string]string{"user.n": val}}
		if i%3 == 0 {
			if err := fsys.Remove(name); err != nil {
				t.Fatal(err)
			}
			delete(want, name)
		}
		if i == 200 {
			compareRead(t, fsys, want) // through the running transaction
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	compareRead(t, fsys, want)
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	dir := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	compareScan(t, got, want)
}
