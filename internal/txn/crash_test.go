package txn_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	randv2 "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// errPowerLost fails every write and sync once the simulated power is gone.
var errPowerLost = errors.New("simulated power loss")

// crashChunk is the unit in which images move between files and Mem
// devices; all-zero chunks are skipped so sparse images stay cheap.
const crashChunk = 64 << 10

// loadMem reads an image file into a new Mem device, all of it synced.
func loadMem(t *testing.T, path string) *blockdev.Mem {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m := blockdev.NewMem(st.Size())
	buf, zero := make([]byte, crashChunk), make([]byte, crashChunk)
	for off := int64(0); off < st.Size(); off += crashChunk {
		n, err := f.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if bytes.Equal(buf[:n], zero[:n]) {
			continue
		}
		if _, err := m.WriteAt(buf[:n], off); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	return m
}

// saveMem writes the contents of m to a new sparse image file at path.
func saveMem(t *testing.T, m *blockdev.Mem, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(m.Size()); err != nil {
		t.Fatal(err)
	}
	buf, zero := make([]byte, crashChunk), make([]byte, crashChunk)
	for off := int64(0); off < m.Size(); off += crashChunk {
		n := int(min(crashChunk, m.Size()-off))
		if _, err := m.ReadAt(buf[:n], off); err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(buf[:n], zero[:n]) {
			continue
		}
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// lossPoint is where the power goes: just before the n-th write or sync
// (counted from 1 within the commit) is carried out. n == 0: never.
type lossPoint struct {
	op blockdev.Op
	n  int
}

// crashRun is what one commit with a power loss left behind.
type crashRun struct {
	disk   *blockdev.Mem      // what the disk holds after the loss
	ops    []blockdev.FaultOp // writes and syncs the commit attempted, N counted per kind within the commit
	want   map[string][]byte  // the xattrs the transaction added
	oldGen disk.Generation
	err    error // Commit's result
	lost   bool  // the loss point was reached
}

// crashCommit runs the test transaction on a copy of base and cuts the
// power at lp: that operation and every later write and sync are lost,
// and of the writes since the last sync a random subset survives (torn
// into sector-sized pieces when torn is set), chosen by rng.
func crashCommit(t *testing.T, base *blockdev.Mem, lp lossPoint, torn bool, rng *randv2.Rand) *crashRun {
	t.Helper()
	mem := base.Clone()
	var dev *blockdev.Faulty
	open := func(string, bool) (blockdev.Device, error) {
		dev = blockdev.NewFaulty(mem)
		return dev, nil
	}
	fs, err := txn.OpenWith([]string{"mem"}, blockdev.ScanOptions{Open: open})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	run := &crashRun{want: map[string][]byte{}, oldGen: fs.Generation()}
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fsTree, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	touchTop(t, tx, fsTree)
	addXattrs(t, tx, fsTree, rand.New(rand.NewSource(1)), 200, run.want)

	var counts [3]int
	lost := false
	dev.SetHook(func(op blockdev.FaultOp) error {
		if op.Op == blockdev.OpRead {
			return nil
		}
		counts[op.Op]++
		op.N = counts[op.Op]
		run.ops = append(run.ops, op)
		if !lost && lp.n > 0 && op.Op == lp.op && op.N == lp.n {
			lost = true
			if torn {
				run.disk = mem.CrashCloneTorn(rng, 4096)
			} else {
				run.disk = mem.CrashClone(rng)
			}
		}
		if lost {
			return errPowerLost
		}
		return nil
	})
	run.err = tx.Commit()
	run.lost = lost
	if run.disk == nil {
		// The power stayed on to the end: whatever is unsynced (nothing,
		// if Commit did its final sync) may still be lost.
		run.disk = mem.CrashClone(rng)
	}
	fs.Close()
	return run
}

// userXattrs reads the xattrs the test adds from the top directory of the
// filesystem on m, through the read-only library.
func userXattrs(m *blockdev.Mem) (map[string][]byte, error) {
	fsys, err := btrfs.OpenDevices([]btrfs.Device{m}, nil)
	if err != nil {
		return nil, fmt.Errorf("read-only open: %w", err)
	}
	defer fsys.Close()
	xs, err := fsys.Xattrs(".")
	if err != nil {
		return nil, fmt.Errorf("xattrs: %w", err)
	}
	got := map[string][]byte{}
	for _, x := range xs {
		if strings.HasPrefix(x.Name, "user.gobtrfs.") {
			got[x.Name] = x.Value
		}
	}
	return got, nil
}

// crashState checks the disk after a loss: it opens read-write (which
// verifies every tree block) and read-only, and holds exactly the old
// state (generation old, none of the xattrs) or the new one (generation
// old+1, all of them). It reports which.
func crashState(run *crashRun) (isNew bool, err error) {
	fs, err := txn.OpenWith([]string{"mem"}, blockdev.ScanOptions{Open: func(string, bool) (blockdev.Device, error) {
		return run.disk.Clone(), nil
	}})
	if err != nil {
		return false, fmt.Errorf("txn.Open: %w", err)
	}
	gen := fs.Generation()
	fs.Close()
	got, err := userXattrs(run.disk)
	if err != nil {
		return false, err
	}
	switch gen {
	case run.oldGen:
		if len(got) != 0 {
			return false, fmt.Errorf("old generation %d but %d of the new xattrs", gen, len(got))
		}
		return false, nil
	case run.oldGen + 1:
		if len(got) != len(run.want) {
			return true, fmt.Errorf("new generation %d but %d xattrs, want %d", gen, len(got), len(run.want))
		}
		for name, v := range run.want {
			if !bytes.Equal(got[name], v) {
				return true, fmt.Errorf("xattr %s is %x, want %x", name, got[name], v)
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("generation %d, want %d or %d", gen, run.oldGen, run.oldGen+1)
}

// checkCrashState is crashState, fatal on error, followed by btrfs check
// of the disk saved to img.
func checkCrashState(t *testing.T, run *crashRun, img, what string) (isNew bool) {
	t.Helper()
	isNew, err := crashState(run)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	saveMem(t, run.disk, img)
	btrfstest.Check(t, []string{img}, false)
	return isNew
}

// maxWriteLosses bounds the write indexes tried per format, to keep the
// test within CI time; syncs and superblock writes are always all tried.
const maxWriteLosses = 40

// lossPoints lists the power losses to try for a commit that made ops:
// every sync, every superblock write, the first and last write and the
// writes around each sync, and a random sample of the other writes.
func lossPoints(ops []blockdev.FaultOp, rng *randv2.Rand) []lossPoint {
	supers := map[int64]bool{}
	for i := 0; i < disk.SuperMirrorMax; i++ {
		supers[int64(disk.SuperblockOffsetOf(i))] = true
	}
	var pts, others []lossPoint
	writes := 0
	for i, op := range ops {
		lp := lossPoint{op: op.Op, n: op.N}
		if op.Op == blockdev.OpWrite {
			writes = op.N
		}
		nearSync := (i > 0 && ops[i-1].Op == blockdev.OpSync) || (i+1 < len(ops) && ops[i+1].Op == blockdev.OpSync)
		switch {
		case op.Op == blockdev.OpSync, supers[op.Off], op.N == 1, nearSync:
			pts = append(pts, lp)
		default:
			others = append(others, lp)
		}
	}
	if last := (lossPoint{op: blockdev.OpWrite, n: writes}); writes > 0 && !slices.Contains(pts, last) {
		pts = append(pts, last)
		others = slices.DeleteFunc(others, func(p lossPoint) bool { return p == last })
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	return append(pts, others[:min(len(others), max(0, maxWriteLosses-len(pts)))]...)
}

// crashTrials is how many random crash images are tried per loss point:
// one with whole writes, one with writes torn into sectors.
const crashTrials = 2

// TestCrashDuringCommit loses power at every sync and at (a sample of)
// every write of a commit that adds 200 xattrs; after each loss the disk
// must open, pass btrfs check and hold exactly the old or the new commit.
func TestCrashDuringCommit(t *testing.T) {
	btrfstest.RequireInterop(t)
	crashFormats := []struct {
		name string
		opts btrfstest.MkfsOptions
	}{
		{"16k-crc32c-dupmeta", btrfstest.MkfsOptions{Size: 128 << 20, MetadataProfile: "dup"}},
		{"4k-xxhash", btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096, Csum: "xxhash"}},
	}
	for _, f := range crashFormats {
		t.Run(f.name, func(t *testing.T) {
			s := seed(t)
			rng := randv2.New(randv2.NewPCG(uint64(s), 0x63726173))
			base := loadMem(t, btrfstest.Mkfs(t, f.opts))
			img := filepath.Join(t.TempDir(), "crash.img")

			ref := crashCommit(t, base, lossPoint{}, false, rng)
			if ref.err != nil {
				t.Fatalf("commit without a power loss: %v", ref.err)
			}
			if !checkCrashState(t, ref, img, "no loss") {
				t.Fatal("commit without a power loss left the old state")
			}
			pts := lossPoints(ref.ops, rng)
			t.Logf("commit made %d writes, %d syncs; trying %d loss points x %d",
				countOps(ref.ops, blockdev.OpWrite), countOps(ref.ops, blockdev.OpSync), len(pts), crashTrials)
			var states [2]int // old, new
			for _, lp := range pts {
				for trial := 0; trial < crashTrials; trial++ {
					torn := trial%2 == 1
					run := crashCommit(t, base, lp, torn, rng)
					what := fmt.Sprintf("loss at %s %d", lp.op, lp.n)
					if torn {
						what += " (torn writes)"
					}
					switch {
					case !run.lost:
						t.Logf("%s: this commit made fewer operations; no loss", what)
					case run.err == nil:
						t.Fatalf("%s: commit succeeded although the power was lost", what)
					}
					if checkCrashState(t, run, img, what) {
						states[1]++
					} else {
						states[0]++
					}
				}
			}
			t.Logf("after the losses: %d times the old state, %d times the new", states[0], states[1])
			if states[0] == 0 {
				t.Error("no power loss left the old state: the losses did not hit the commit")
			}
		})
	}
}

// noSync is a Mem whose Sync does nothing: a disk that reorders writes
// freely, for checking that the crash test notices broken ordering.
type noSync struct{ *blockdev.Mem }

func (noSync) Sync() error { return nil }

// TestCrashHarnessCatchesReordering runs the commit on a disk that ignores
// syncs and then loses a random part of everything written: some of the
// results must be caught as neither the old nor the new state, or the
// crash test above could not fail.
func TestCrashHarnessCatchesReordering(t *testing.T) {
	btrfstest.RequireInterop(t)
	s := seed(t)
	rng := randv2.New(randv2.NewPCG(uint64(s), 0x72656f72))
	base := loadMem(t, btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096}))
	caught := 0
	const trials = 20
	for i := 0; i < trials; i++ {
		mem := base.Clone()
		fs, err := txn.OpenWith([]string{"mem"}, blockdev.ScanOptions{Open: func(string, bool) (blockdev.Device, error) {
			return noSync{mem}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		run := &crashRun{want: map[string][]byte{}, oldGen: fs.Generation()}
		tx, err := fs.Begin()
		if err != nil {
			t.Fatal(err)
		}
		fsTree, err := tx.Tree(disk.FSTreeObjectID)
		if err != nil {
			t.Fatal(err)
		}
		addXattrs(t, tx, fsTree, rand.New(rand.NewSource(1)), 200, run.want)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		run.disk = mem.CrashClone(rng)
		fs.Close()
		if _, err := crashState(run); err != nil {
			caught++
		}
	}
	t.Logf("%d of %d reordered crashes caught", caught, trials)
	if caught == 0 {
		t.Fatal("a disk ignoring syncs never produced a detectably broken state")
	}
}

// countOps counts the operations of kind op in ops.
func countOps(ops []blockdev.FaultOp, op blockdev.Op) int {
	n := 0
	for _, o := range ops {
		if o.Op == op {
			n++
		}
	}
	return n
}
