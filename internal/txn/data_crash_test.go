package txn_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	randv2 "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// dataCrashRun is what one data transaction with a power loss left.
type dataCrashRun struct {
	disk     *blockdev.Mem
	ops      []blockdev.FaultOp
	oldGen   disk.Generation
	old, new map[string][]byte // file contents before and after
	err      error             // the data write's or Commit's error
	lost     bool
}

// dataCrashTxn is the transaction under test, on a base holding "old"
// (inode 257, one 128 KiB extent): old is truncated, and "new" gets a
// fresh 192 KiB extent followed by a reflink of old's extent. The power
// may go during the data writes (before Commit) as well as in Commit.
func dataCrashTxn(t *testing.T, tx *txn.Txn, run *dataCrashRun) error {
	t.Helper()
	b := newBuilder(t, tx, run.new)
	b.tolerate = true
	tr := b.tree
	data, _, err := tr.Lookup(tx.Trans(), extentKey(257, 0))
	if err != nil {
		return err
	}
	var fe disk.FileExtentItem
	if err := fe.Decode(data); err != nil {
		return err
	}
	b.dropExtent(257, "old", 0, 0)
	b.createFile(258, "new", 3)
	d := randBytes(rand.New(rand.NewSource(2)), 192<<10)
	a := b.writeExtent(d)
	if b.werr != nil {
		return b.werr
	}
	b.putExtent(258, "new", 0, a, uint64(len(d)), 0, uint64(len(d)), d)
	b.putExtent(258, "new", uint64(len(d)), fe.DiskBytenr, fe.DiskNumBytes, 0, fe.NumBytes, run.old["old"])
	return tx.Commit()
}

// crashDataCommit runs dataCrashTxn on a copy of base and cuts the power
// at lp (see crashCommit); the loss may hit a data write.
func crashDataCommit(t *testing.T, base *blockdev.Mem, old map[string][]byte, lp lossPoint, torn bool, rng *randv2.Rand) *dataCrashRun {
	t.Helper()
	mem := base.Clone()
	var dev *blockdev.Faulty
	open := func(string, bool) (blockdev.Device, error) {
		dev = blockdev.NewFaulty(mem)
		return dev, nil
	}
	fsys, err := txn.OpenWith([]string{"mem"}, blockdev.ScanOptions{Open: open})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer fsys.Close()
	run := &dataCrashRun{oldGen: fsys.Generation(), old: old, new: map[string][]byte{"old": old["old"]}}
	var counts [3]int
	dev.SetHook(func(op blockdev.FaultOp) error {
		if op.Op == blockdev.OpRead {
			return nil
		}
		counts[op.Op]++
		op.N = counts[op.Op]
		run.ops = append(run.ops, op)
		if !run.lost && lp.n > 0 && op.Op == lp.op && op.N == lp.n {
			run.lost = true
			if torn {
				run.disk = mem.CrashCloneTorn(rng, 4096)
			} else {
				run.disk = mem.CrashClone(rng)
			}
		}
		if run.lost {
			return errPowerLost
		}
		return nil
	})
	tx, err := fsys.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if run.err = dataCrashTxn(t, tx, run); run.err != nil {
		tx.Abort()
	}
	if run.disk == nil {
		run.disk = mem.CrashClone(rng)
	}
	return run
}

// readFiles reads the named files of the top directory through the
// read-only library; a missing file maps to nil.
func readFiles(m *blockdev.Mem, names []string) (map[string][]byte, error) {
	fsys, err := btrfs.OpenDevices([]btrfs.Device{m}, nil)
	if err != nil {
		return nil, fmt.Errorf("read-only open: %w", err)
	}
	defer fsys.Close()
	got := map[string][]byte{}
	for _, n := range names {
		b, err := fsys.ReadFile(n)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			got[n] = nil
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", n, err)
		default:
			got[n] = b
		}
	}
	return got, nil
}

// sameFiles compares two file maps (nil: absent; empty: empty file).
func sameFiles(got, want map[string][]byte, names []string) bool {
	for _, n := range names {
		if (got[n] == nil) != (want[n] == nil) || !bytes.Equal(got[n], want[n]) {
			return false
		}
	}
	return true
}

// dataCrashState checks a disk after a loss: it opens read-write, holds
// the old or the new generation, its files are exactly that state's, and
// btrfs check with data checksums is clean. It reports which state.
func dataCrashState(t *testing.T, run *dataCrashRun, img, what string) (isNew bool) {
	t.Helper()
	fsys, err := txn.OpenWith([]string{"mem"}, blockdev.ScanOptions{Open: func(string, bool) (blockdev.Device, error) {
		return run.disk.Clone(), nil
	}})
	if err != nil {
		t.Fatalf("%s: txn.Open: %v", what, err)
	}
	gen := fsys.Generation()
	fsys.Close()
	names := []string{"old", "new"}
	got, err := readFiles(run.disk, names)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	switch gen {
	case run.oldGen:
		if !sameFiles(got, run.old, names) {
			t.Fatalf("%s: old generation but not the old files", what)
		}
	case run.oldGen + 1:
		if !sameFiles(got, run.new, names) {
			t.Fatalf("%s: new generation but not the new files", what)
		}
		isNew = true
	default:
		t.Fatalf("%s: generation %d, want %d or %d", what, gen, run.oldGen, run.oldGen+1)
	}
	saveMem(t, run.disk, img)
	btrfstest.Check(t, []string{img}, true)
	return isNew
}

// TestCrashDuringDataCommit loses power at every sync and a sample of the
// writes (data writes before Commit included) of a transaction that frees
// one file's data, writes a new extent and reflinks an old one; after each
// loss the disk passes btrfs check --check-data-csum and holds exactly
// the old or the new files.
func TestCrashDuringDataCommit(t *testing.T) {
	btrfstest.RequireInterop(t)
	s := seed(t)
	rng := randv2.New(randv2.NewPCG(uint64(s), 0x64617461))
	img0 := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096, Csum: "xxhash"})
	old := map[string][]byte{}
	dataCommitWant(t, []string{img0}, old, func(b *fsBuilder) {
		b.createFile(257, "old", 2)
		d := randBytes(rand.New(rand.NewSource(s)), 128<<10)
		a := b.writeExtent(d)
		b.putExtent(257, "old", 0, a, uint64(len(d)), 0, uint64(len(d)), d)
	}, nil)
	old["new"] = nil
	base := loadMem(t, img0)
	img := filepath.Join(t.TempDir(), "crash.img")

	ref := crashDataCommit(t, base, old, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("commit without a power loss: %v", ref.err)
	}
	if !dataCrashState(t, ref, img, "no loss") {
		t.Fatal("commit without a power loss left the old state")
	}
	pts := lossPoints(ref.ops, rng)
	t.Logf("transaction made %d writes, %d syncs; trying %d loss points",
		countOps(ref.ops, blockdev.OpWrite), countOps(ref.ops, blockdev.OpSync), len(pts))
	// One trial per loss point, whole and torn writes alternating; both
	// at every point with GOBTRFS_LONG=1.
	trials := 1
	if os.Getenv("GOBTRFS_LONG") == "1" {
		trials = crashTrials
	}
	var states [2]int
	for i, lp := range pts {
		for trial := 0; trial < trials; trial++ {
			torn := (i+trial)%2 == 1
			run := crashDataCommit(t, base, old, lp, torn, rng)
			what := fmt.Sprintf("loss at %s %d (torn %v)", lp.op, lp.n, torn)
			if run.lost && run.err == nil {
				t.Fatalf("%s: commit succeeded although the power was lost", what)
			}
			if dataCrashState(t, run, img, what) {
				states[1]++
			} else {
				states[0]++
			}
		}
	}
	t.Logf("after the losses: %d times the old state, %d times the new", states[0], states[1])
	if states[0] == 0 {
		t.Error("no power loss left the old state")
	}
}
