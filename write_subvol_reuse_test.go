package btrfs_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
)

// TestSubvolumeIDReused: a subvolume created after the one with the
// highest id was deleted gets that id again (the root tree's highest
// plus one, as the kernel picks it after a remount). What the writer
// counted for the deleted tree (its next inode number, after a write
// into it was refused; the DIR_INDEX counters of its directories) must
// not carry over to the new tree: found by TestSnapshotModel, where the
// new snapshot's next inode number was the deleted one's, taken in the
// source since ("key exists" on the next create).
func TestSubvolumeIDReused(t *testing.T) {
	img := formatTemp(t, 128<<20)
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = w.CreateSubvolume("sv", nil)
	must(err)
	must(w.WriteFile("sv/a", []byte("a"), 0o644))
	// A read-only snapshot; a write into it is refused (EROFS) after
	// it counted the snapshot's next inode number.
	ro, err := w.Snapshot("sv", "ro", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	if err := w.WriteFile("ro/x", []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write into a read-only snapshot: %v, want EROFS", err)
	}
	// A writable one whose directory counters are counted.
	rw, err := w.Snapshot("sv", "rw", nil)
	must(err)
	must(w.WriteFile("rw/y", []byte("y"), 0o644))
	must(w.Commit())
	must(w.DeleteSubvolume("rw"))
	must(w.DeleteSubvolume("ro"))
	must(w.Commit())
	// The source gets new inodes and entries past the counted ones.
	for i := range 5 {
		must(w.WriteFile(fmt.Sprintf("sv/b%d", i), []byte("b"), 0o644))
	}
	for _, want := range []uint64{ro, rw} {
		id, err := w.Snapshot("sv", fmt.Sprintf("again%d", want), nil)
		must(err)
		if id != want {
			t.Logf("snapshot got id %d, not the deleted %d: the test no longer reuses an id", id, want)
		}
		for i := range 3 {
			must(w.WriteFile(fmt.Sprintf("again%d/c%d", want, i), []byte("c"), 0o644))
			must(w.Mkdir(fmt.Sprintf("again%d/d%d", want, i), 0o755))
		}
	}
	must(w.Commit())
	for _, want := range []uint64{ro, rw} {
		ents, err := w.ReadDir(fmt.Sprintf("again%d", want))
		must(err)
		if len(ents) != 1+5+6 {
			t.Errorf("again%d: %d entries, want 12", want, len(ents))
		}
	}
}
