//go:build linux

package btrfs_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// TestSnapshotWrittenThenDroppedByKernel: the kernel, deleting a
// snapshot, takes a block of generation at most the snapshot's creation
// generation (its ROOT_ITEM's key offset) for one the snapshot cannot
// own: it drops the snapshot's reference to it and does not look below
// (the check that Linux's snapshot delete makes, "generation <=
// root_key.offset"). A block the snapshot copied in the transaction that
// made it breaks that: it is owned by the snapshot, and when a later
// snapshot of the snapshot shares it and the kernel deletes the first,
// the references keyed by the deleted snapshot below it stay (btrfs
// check: "referencer count mismatch", the blocks then freed under the
// second snapshot). Found by TestSnapshotModel's kernel session (seed
// 9457202455054020248 of the mixed variant, before the fix): Snapshot
// now commits, so writes into a new snapshot start in the next
// transaction, as on Linux, where a snapshot is made by a commit.
func TestSnapshotWrittenThenDroppedByKernel(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 256 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
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
	_, err = w.CreateSubvolume("sv", nil)
	must(err)
	for i := range 1200 { // three levels of inline files
		p := fmt.Sprintf("sv/d%02d/f%04d", i%16, i)
		must(w.MkdirAll(filepath.Dir(p), 0o755))
		must(w.WriteFile(p, []byte(fmt.Sprintf("%0300d", i)), 0o644))
	}
	must(w.Commit())
	_, err = w.Snapshot("sv", "s1", nil)
	must(err)
	// Written right after the snapshot: the copies of its shared
	// blocks are the snapshot's own.
	for i := 0; i < 1200; i += 7 {
		must(w.WriteFile(fmt.Sprintf("s1/d%02d/f%04d", i%16, i), []byte("changed"), 0o644))
	}
	must(w.Commit())
	_, err = w.Snapshot("s1", "s2", nil)
	must(err)
	must(w.Close())
	btrfstest.Check(t, []string{img}, false)

	dir := btrfstest.Mount(t, "", img)
	for _, args := range [][]string{{"subvolume", "delete", dir + "/s1"}, {"filesystem", "sync", dir}, {"subvolume", "sync", dir}} {
		if out, err := exec.Command("btrfs", args...).CombinedOutput(); err != nil {
			t.Fatalf("btrfs %v: %v\n%s", args, err, out)
		}
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, false)
	btrfstest.CheckNewer(t, img, false)
	r, err := btrfs.Open(img, nil)
	must(err)
	defer r.Close()
	for i := 0; i < 1200; i++ {
		want := fmt.Sprintf("%0300d", i)
		if i%7 == 0 {
			want = "changed"
		}
		got, err := r.ReadFile(fmt.Sprintf("s2/d%02d/f%04d", i%16, i))
		if err != nil || string(got) != want {
			t.Fatalf("s2/d%02d/f%04d: %q, %v; want %q", i%16, i, got, err, want)
		}
	}
}
