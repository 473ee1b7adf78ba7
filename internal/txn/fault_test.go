package txn_test

import (
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// copyFile copies src to a new file dst (sparse images stay small enough
// for the test sizes used here).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// faultyCommit opens img with every device write from the failAt-th on
// failing (0: none), runs one transaction adding xattrs from a fixed seed,
// and returns the number of writes seen and the commit error.
func faultyCommit(t *testing.T, img string, failAt int) (int, error) {
	t.Helper()
	var dev *blockdev.Faulty
	open := func(path string, readOnly bool) (blockdev.Device, error) {
		f, err := blockdev.OpenFile(path, readOnly)
		if err != nil {
			return nil, err
		}
		dev = blockdev.NewFaulty(f)
		if failAt > 0 {
			dev.FailAt(blockdev.OpWrite, failAt, true)
		}
		return dev, nil
	}
	fs, err := txn.OpenWith([]string{img}, blockdev.ScanOptions{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fsTree, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	touchTop(t, tx, fsTree)
	addXattrs(t, tx, fsTree, rand.New(rand.NewSource(1)), 120, map[string][]byte{})
	err = tx.Commit()
	return dev.Count(blockdev.OpWrite), err
}

// superGen reads the generation of the primary superblock of img.
func superGen(t *testing.T, img string) disk.Generation {
	t.Helper()
	set, err := blockdev.Scan([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	return set.Super.Generation
}

// TestCommitWriteFailure fails the commit at every write in turn: the
// image left behind is always the old commit or the new one, and clean.
func TestCommitWriteFailure(t *testing.T) {
	base := btrfstest.Mkfs(t, btrfstest.MkfsOptions{MetadataProfile: "dup"})
	old := superGen(t, base)
	img := filepath.Join(t.TempDir(), "img")
	copyFile(t, base, img)
	writes, err := faultyCommit(t, img, 0)
	if err != nil {
		t.Fatalf("commit without faults: %v", err)
	}
	t.Logf("a commit makes %d device writes", writes)
	for k := 1; k <= writes; k++ {
		copyFile(t, base, img)
		_, err := faultyCommit(t, img, k)
		if err == nil || !errors.Is(err, blockdev.ErrInjected) {
			t.Fatalf("write %d failing: commit returned %v", k, err)
		}
		gen := superGen(t, img)
		if gen != old && gen != old+1 {
			t.Fatalf("write %d failing: generation %d, want %d or %d", k, gen, old, old+1)
		}
		btrfstest.Check(t, []string{img}, false)
	}
}
