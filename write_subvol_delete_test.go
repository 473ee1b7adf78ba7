//go:build linux

package btrfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestDeleteSubvolume deletes subvolumes with our writer: a snapshot
// (its shared blocks lose its reference, the rest is freed), then its
// source (whose blocks are its own again), a one-leaf subvolume changed
// in the same transaction, a nested one; after each commit btrfs check
// (6.2, and 6.19 where present) is clean, the kernel no longer shows
// them, shows the rest unchanged, and writes on. The kernel's refusals
// are ours: the default subvolume (EPERM), one holding others
// (ENOTEMPTY), a plain directory (EINVAL). A source is deleted while a
// writable snapshot shares its blocks (their references become
// references by parent block and leaf), the kernel shows the snapshot
// whole, then the snapshot goes too and the extent tree holds no data
// extent and no reference by parent any more.
func TestDeleteSubvolume(t *testing.T) {
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
	_, err = w.CreateSubvolume("big", nil)
	must(err)
	for i := range 500 {
		dir := fmt.Sprintf("big/d%02d", i%20)
		must(w.MkdirAll(dir, 0o755))
		must(w.WriteFile(fmt.Sprintf("%s/f%03d", dir, i), []byte(strings.Repeat(fmt.Sprint(i), 10+i*9)), 0o644))
	}
	_, err = w.CreateSubvolume("small", nil)
	must(err)
	must(w.WriteFile("small/f", make([]byte, 70000), 0o644))
	_, err = w.CreateSubvolume("outer", nil)
	must(err)
	_, err = w.CreateSubvolume("outer/inner", nil)
	must(err)
	def, err := w.CreateSubvolume("def", nil)
	must(err)
	must(w.SetDefaultSubvolume(def))
	must(w.Mkdir("plain", 0o755))
	_, err = w.Snapshot("big", "snap", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	_, err = w.Snapshot("big", "snap2", nil)
	must(err)
	must(w.Commit())

	for _, c := range []struct {
		name string
		want error
	}{{"def", syscall.EPERM}, {"outer", syscall.ENOTEMPTY}, {"plain", syscall.EINVAL}, {"missing", syscall.ENOENT},
		{"small/f", syscall.ENOTDIR}} {
		if err := w.DeleteSubvolume(c.name); !errors.Is(err, c.want) {
			t.Errorf("delete %s: %v, want %v", c.name, err, c.want)
		}
	}
	must(w.DeleteSubvolume("snap"))
	// A subvolume changed in the running transaction: committed first,
	// then deleted.
	must(w.WriteFile("small/g", []byte("new"), 0o644))
	must(w.DeleteSubvolume("small"))
	must(w.DeleteSubvolume("outer/inner"))
	must(w.Commit())
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	// The source while snap2 shares its blocks.
	must(w.DeleteSubvolume("big"))
	must(w.Commit())
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	if lvl := rootLevel(t, img, "snap2"); lvl < 1 {
		t.Errorf("snap2: root level %d, want a tree of two levels or more", lvl)
	}
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "extent", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -t extent: %v\n%s", err, out)
	}
	// Its leaves, which snap2 reaches, name their data by address now.
	for _, want := range []string{"FULL_BACKREF", "shared data backref"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("extent tree after the source went: no %q", want)
		}
	}
	dir := btrfstest.Mount(t, "ro,subvolid=5", img)
	for i := range 500 {
		p := filepath.Join(dir, fmt.Sprintf("snap2/d%02d/f%03d", i%20, i))
		if b, err := os.ReadFile(p); err != nil || string(b) != strings.Repeat(fmt.Sprint(i), 10+i*9) {
			t.Errorf("the kernel's %s after its source went: %d bytes, %v", p, len(b), err)
			break
		}
	}
	btrfstest.Unmount(t, dir)
	must(w.DeleteSubvolume("snap2"))
	must(w.Close())
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	out, err = exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "extent", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -t extent: %v\n%s", err, out)
	}
	for _, left := range []string{"flags DATA", "FULL_BACKREF", "shared block backref", "shared data backref", "SHARED_DATA_REF"} {
		if strings.Contains(string(out), left) {
			t.Errorf("extent tree after every file subvolume went: %q left", left)
		}
	}

	dir = btrfstest.Mount(t, "subvolid=5", img)
	for _, p := range []string{"snap", "snap2", "big", "small", "outer/inner"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the kernel still shows %s: %v", p, err)
		}
	}
	for _, p := range []string{"outer", "def", "plain"} {
		if fi, err := os.Lstat(filepath.Join(dir, p)); err != nil || !fi.IsDir() {
			t.Errorf("the kernel's %s: %v", p, err)
		}
	}
	// The kernel writes on, in the names we freed too.
	must(os.Mkdir(filepath.Join(dir, "small"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "small/k"), make([]byte, 300000), 0o644))
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, true)
}
