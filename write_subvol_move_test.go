//go:build linux

package btrfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestSubvolumeRenameInterop moves subvolume and snapshot links as the
// kernel does (docs/design/0023, "Renaming and removing subvolumes"):
// within a directory, to another directory of the parent subvolume, into
// another subvolume, over an empty directory, exchanged with a file and
// with a subvolume of another parent, RENAME_NOREPLACE; and removes empty
// subvolumes (a read-only snapshot too) and a snapshot's placeholder as
// the kernel's rmdir does. The kernel's refusals are ours. After the
// commit btrfs check (6.2, and 6.19 where present) is clean, the
// kernel's view of every moved subvolume equals what it showed at the old
// place, `btrfs subvolume list` names the new paths, and the kernel then
// writes into the moved subvolumes with check staying clean.
func TestSubvolumeRenameInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := formatTemp(t, 512<<20)
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mkSub := func(name string) {
		t.Helper()
		_, err := w.CreateSubvolume(name, nil)
		must(err)
	}
	must(w.MkdirAll("a", 0o755))
	must(w.MkdirAll("b", 0o755))
	must(w.Mkdir("ed", 0o755))
	must(w.Mkdir("full", 0o755))
	must(w.WriteFile("full/x", []byte("x"), 0o644))
	must(w.WriteFile("f", []byte("plain file"), 0o644))
	mkSub("a/sv")
	for i := range 300 {
		dir := fmt.Sprintf("a/sv/d%02d", i%10)
		must(w.MkdirAll(dir, 0o755))
		must(w.WriteFile(fmt.Sprintf("%s/f%03d", dir, i), []byte(strings.Repeat(fmt.Sprint(i), 10+i*40)), 0o644))
	}
	mkSub("a/sv/inner")
	must(w.WriteFile("a/sv/inner/g", []byte("inner"), 0o644))
	mkSub("o")
	must(w.Mkdir("o/d", 0o755))
	mkSub("o/os")
	must(w.WriteFile("o/os/h", make([]byte, 20000), 0o644))
	mkSub("e1")
	mkSub("e2")
	must(w.WriteFile("e2/k", []byte("e2"), 0o644))
	mkSub("empty")
	mkSub("emptysrc")
	mkSub("def")
	def, err := w.SubvolumeAt("def")
	must(err)
	must(w.SetDefaultSubvolume(def))
	must(w.Commit())
	_, err = w.Snapshot("a/sv", "snap", nil)
	must(err)
	_, err = w.Snapshot("a/sv", "rosnap", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	_, err = w.Snapshot("emptysrc", "emptyro", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	for _, name := range []string{"snap2", "snap3"} {
		_, err = w.Snapshot("a/sv", name, nil)
		must(err)
	}
	mkSub("empty2")
	must(w.Commit())
	btrfstest.Check(t, []string{img}, true)

	// What the kernel shows of each subvolume before the moves.
	moves := map[string]string{ // old path -> new path
		"a/sv": "b/sv3", "rosnap": "a/rosnap", "snap": "a/snap", "e1": "ed",
		"e2": "f", "o/os": "b/os", "empty": "gone", "emptyro": "gone",
	}
	before := map[string]*btrfstest.Tree{}
	dir := btrfstest.Mount(t, "ro,subvolid=5", img)
	for old := range moves {
		tr, err := btrfstest.Scan(filepath.Join(dir, old))
		must(err)
		before[old] = tr
	}
	btrfstest.Unmount(t, dir)

	// The kernel's refusals (checked on Linux 6.18 with renameat2).
	for _, c := range []struct {
		op       string
		from, to string
		want     error
	}{
		{"rename", "o", "o/d/x", syscall.EINVAL},        // into itself
		{"rename", "o", "o/os/x", syscall.EINVAL},       // into a subvolume inside it
		{"rename", "a/sv", "e1", syscall.ENOTEMPTY},     // a subvolume is never replaced
		{"rename", "ed", "e1", syscall.ENOTEMPTY},       // not by a directory either
		{"rename", "f", "e1", syscall.EISDIR},           // a file over a subvolume
		{"rename", "a/sv", "f", syscall.ENOTDIR},        // a subvolume over a file
		{"rename", "a/sv", "full", syscall.ENOTEMPTY},   // over a directory with entries
		{"rename", "a/sv", "rosnap/x", syscall.EROFS},   // into a read-only snapshot
		{"rename", "snap/inner", "x", syscall.EXDEV},    // a snapshot's placeholder
		{"rename", "o/os/h", "b/h", syscall.EXDEV},      // files stay in their subvolume
		{"noreplace", "a/sv", "ed", syscall.EEXIST},     // RENAME_NOREPLACE
		{"exchange", "f", "o/d", syscall.EXDEV},         // an inode exchanged across subvolumes
		{"exchange", "o", "o/os", syscall.EINVAL},       // one holding the other
		{"exchange", "snap/inner", "e1", syscall.EXDEV}, // a placeholder
		{"remove", "a/sv", "", syscall.ENOTEMPTY},       // rmdir of a subvolume with entries
		{"remove", "def", "", syscall.EPERM},            // the default subvolume
	} {
		var err error
		switch c.op {
		case "rename":
			err = w.Rename(c.from, c.to)
		case "noreplace":
			err = w.RenameNoReplace(c.from, c.to)
		case "exchange":
			err = w.RenameExchange(c.from, c.to)
		case "remove":
			err = w.Remove(c.from)
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s %s %s: %v, want %v", c.op, c.from, c.to, err, c.want)
		}
	}

	must(w.Rename("a/sv", "b/sv2"))           // another directory of the parent
	must(w.Rename("b/sv2", "b/sv3"))          // the same directory
	must(w.Rename("b/sv3", "b/sv3"))          // itself: nothing
	must(w.Rename("rosnap", "a/rosnap"))      // a read-only snapshot moves
	must(w.RenameNoReplace("snap", "a/snap")) // RENAME_NOREPLACE
	must(w.Rename("e1", "o/d/e1"))            // into another subvolume
	must(w.Rename("o/d/e1", "ed"))            // back, over an empty directory
	must(w.RenameExchange("e2", "f"))         // with a file: f is the subvolume now
	must(w.RenameExchange("b/sv3", "o/os"))   // two subvolumes of different parents
	must(w.RenameExchange("o/os", "b/sv3"))   // and back
	must(w.Rename("o/os", "b/os"))            // out of its parent subvolume
	must(w.Remove("a/snap/inner"))            // a placeholder goes, as the kernel's rmdir
	// A placeholder is replaced by a directory or a subvolume, not by a
	// file.
	must(w.WriteFile("snap2/ff", []byte("ff"), 0o644))
	if err := w.Rename("snap2/ff", "snap2/inner"); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("a file over a placeholder: %v, want EISDIR", err)
	}
	must(w.Mkdir("snap2/dd", 0o700))
	must(w.WriteFile("snap2/dd/x", []byte("x"), 0o644))
	must(w.Remove("snap2/dd/x"))
	must(w.Rename("snap2/dd", "snap2/inner"))
	must(w.Rename("empty2", "snap3/inner"))
	must(w.Remove("empty"))   // an empty subvolume is deleted
	must(w.Remove("emptyro")) // a read-only one too
	if b, err := w.ReadFile("e2"); err != nil || string(b) != "plain file" {
		t.Errorf("e2 (the file exchanged): %q, %v", b, err)
	}
	if b, err := w.ReadFile("f/k"); err != nil || string(b) != "e2" {
		t.Errorf("f/k (the subvolume e2 moved): %q, %v", b, err)
	}
	want := []string{"a/rosnap", "a/snap", "b/os", "b/sv3", "b/sv3/inner", "def", "ed", "emptysrc", "f", "o", "snap2", "snap3", "snap3/inner"}
	if got := subvolPaths(t, w); !slices.Equal(got, want) {
		t.Errorf("our subvolume paths before the commit: %q, want %q", got, want)
	}
	must(w.Close())
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)

	dir = btrfstest.Mount(t, "ro,subvolid=5", img)
	for old, now := range moves {
		if now == "gone" {
			if _, err := os.Lstat(filepath.Join(dir, old)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the kernel still shows %s: %v", old, err)
			}
			continue
		}
		tr, err := btrfstest.Scan(filepath.Join(dir, now))
		must(err)
		// (The placeholder of snap/inner was removed.)
		opts := btrfstest.DiffOptions{IgnoreDirMtime: true, Filter: func(p string) bool { return old != "snap" || p != "inner" }}
		if d := btrfstest.Diff(before[old], tr, opts); len(d) > 0 {
			t.Errorf("the kernel's %s differs from %s before the move: %q", now, old, d)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "a/snap/inner")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the kernel still shows the placeholder: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "snap2/inner")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the kernel's snap2/inner (the directory moved over the placeholder): %v, %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "e2")); err != nil || string(b) != "plain file" {
		t.Errorf("the kernel's e2 (the file exchanged): %q, %v", b, err)
	}
	out, err := exec.Command("btrfs", "subvolume", "list", dir).CombinedOutput()
	must(err)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		got = append(got, line[strings.LastIndex(line, " path ")+len(" path "):])
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("btrfs subvolume list: %q, want %q\n%s", got, want, out)
	}
	btrfstest.Unmount(t, dir)

	// The kernel writes into the moved subvolumes and moves them on.
	dir = btrfstest.Mount(t, "subvolid=5", img)
	must(os.WriteFile(filepath.Join(dir, "b/sv3/d03/new"), make([]byte, 100000), 0o644))
	must(os.WriteFile(filepath.Join(dir, "a/snap/d04/new"), []byte("snap"), 0o644))
	must(os.Remove(filepath.Join(dir, "b/sv3/d05/f005")))
	must(os.Rename(filepath.Join(dir, "b/os"), filepath.Join(dir, "o/d/os")))
	must(os.WriteFile(filepath.Join(dir, "o/d/os/more"), []byte("more"), 0o644))
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, true)

	// And we read what it did.
	r, err := btrfs.Open(img, nil)
	must(err)
	defer r.Close()
	if b, err := r.ReadFile("o/d/os/more"); err != nil || string(b) != "more" {
		t.Errorf("o/d/os/more: %q, %v", b, err)
	}
	want = []string{"a/rosnap", "a/snap", "b/sv3", "b/sv3/inner", "def", "ed", "emptysrc", "f", "o", "o/d/os", "snap2", "snap3", "snap3/inner"}
	if got := subvolPaths(t, r); !slices.Equal(got, want) {
		t.Errorf("subvolume paths after the kernel's move: %q, want %q", got, want)
	}
}

// subvolPaths lists the paths of the subvolumes of fsys, sorted.
func subvolPaths(t *testing.T, fsys *btrfs.FS) []string {
	t.Helper()
	svs, err := fsys.Subvolumes()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sv := range svs {
		out = append(out, sv.Path)
	}
	slices.Sort(out)
	return out
}
