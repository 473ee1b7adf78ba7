//go:build linux

package btrfs_test

import (
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestCrashDuringKernelDropFinish cuts the power while OpenWritable
// finishes the drops the kernel's cleaner left half done
// (TestFinishKernelDrop's image: src, whose read-only snapshot src-snap
// outlives it, stopped at a drop_progress; gone, dropped whole or not
// begun or stopped too): at every superblock write of the finishing
// commit, at its last sync, and at two other writes or syncs drawn at
// random (every write and sync with GOBTRFS_LONG=1), whole and torn
// alternately. Every image afterwards opens with our reader (keep and two
// of src-snap's directories drawn at random as the kernel showed them,
// the deleted subvolumes without names), passes btrfs check
// --check-data-csum 6.2 (with our checker) and 6.19, and is either the
// kernel's half-dropped state (each dead subvolume's ROOT_ITEM, with its
// drop_progress, and orphan item exactly as the kernel left them) or
// the finished one (neither left); opened for writing again, a
// half-dropped one is finished, check clean.
func TestCrashDuringKernelDropFinish(t *testing.T) {
	btrfstest.RequireInterop(t)
	rng := rand.New(rand.NewPCG(testSeed(t), 18))
	img, ids, want := halfDropped(t)
	root0 := dumpTree(t, img, "root")
	// What the kernel left to drop, as it left it.
	left := map[string]string{}
	for _, sv := range []string{"gone", "src"} {
		if item := rootItemText(root0, ids[sv]); item != "" {
			left[sv] = item
		}
	}
	half := false
	for _, item := range left {
		half = half || !strings.Contains(item, "drop_progress key (0 UNKNOWN.0 0)")
	}
	if !half {
		t.Fatalf("no subvolume half dropped: %q", left)
	}
	base := readImage(t, img)
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")

	// dropState tells the two states apart by the root tree: every
	// subvolume the kernel left to drop still as it left it, or none.
	dropState := func(what string) string {
		t.Helper()
		root := dumpTree(t, check, "root")
		states := map[string]bool{}
		for sv, item := range left {
			got := rootItemText(root, ids[sv])
			orphan := strings.Contains(root, fmt.Sprintf("ORPHAN_ITEM %d)", ids[sv]))
			switch {
			case got == item && orphan:
				states["half"] = true
			case got == "" && !orphan:
				states["finished"] = true
			default:
				t.Fatalf("%s: %s (%d) neither as the kernel left it nor dropped (orphan item %v):\n%s", what, sv, ids[sv], orphan, got)
			}
		}
		if len(states) != 1 {
			t.Fatalf("%s: some drops finished, others not: %v", what, states)
		}
		return slices.Collect(maps.Keys(states))[0]
	}
	state := func(run *lossRun, what string) string {
		t.Helper()
		crashImageOf(t, run.disk, run.disk.Size()).save(t, check)
		fsys, err := btrfs.Open(check, nil)
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		for _, sv := range slices.Sorted(maps.Keys(want)) {
			// keep whole; of src-snap's 20 directories of 4000
			// files each, two drawn at random.
			var dirs map[string]bool
			if sv == "src-snap" {
				dirs = map[string]bool{}
				for range 2 {
					dirs[fmt.Sprintf("d%02d", rng.IntN(20))] = true
				}
			}
			if d := ourSnapModelDiff(t, fsys, sv, want[sv], dirs); len(d) > 0 {
				t.Fatalf("%s: our reader's %s: %q", what, sv, d[:min(len(d), 10)])
			}
		}
		for sv := range left {
			if _, err := fsys.Lstat(sv); err == nil {
				t.Errorf("%s: our reader shows the deleted %s", what, sv)
			}
		}
		fsys.Close()
		st := dropState(what)
		btrfstest.Check(t, []string{check}, true)
		btrfstest.CheckNewer(t, check, true)
		w, err := btrfs.OpenWritable(check, nil)
		if err != nil {
			t.Fatalf("%s: open for writing: %v", what, err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("%s: close: %v", what, err)
		}
		if st == "half" {
			if again := dropState(what + ", opened again"); again != "finished" {
				t.Fatalf("%s: opened again for writing, the drops are left %s", what, again)
			}
			btrfstest.Check(t, []string{check}, true)
			btrfstest.CheckNewer(t, check, true)
		}
		return st
	}

	ref := finishWithLoss(t, base, work, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("without a power loss: %v", ref.err)
	}
	if st := state(ref, "no loss"); st != "finished" {
		t.Fatalf("without a power loss: state %s", st)
	}
	// The finish is one commit: one write of the primary superblock.
	supers := 0
	for _, op := range ref.ops {
		if op.Op == blockdev.OpWrite && op.Off == int64(disk.SuperblockOffsetOf(0)) {
			supers++
		}
	}
	if supers != 1 {
		t.Errorf("the finish wrote the superblock %d times, want once (one commit)", supers)
	}
	pts := finishLossPoints(ref.ops, rng, longTests())
	t.Logf("the finish made %d writes, %d syncs; trying %d loss points",
		ref.count[blockdev.OpWrite], ref.count[blockdev.OpSync], len(pts))
	states := map[string]int{}
	for i, lp := range pts {
		run := finishWithLoss(t, base, work, lp, i%2 == 1, rng)
		what := fmt.Sprintf("loss at %s %d (torn %v)", lp.op, lp.n, i%2 == 1)
		if !run.lost || run.err == nil {
			t.Fatalf("%s: lost %v, error %v: want the loss to fail the open", what, run.lost, run.err)
		}
		states[state(run, what)]++
	}
	t.Logf("states after the losses: %v", states)
	if states["half"] == 0 {
		t.Errorf("states %v: no loss left the kernel's half-dropped state", states)
	}
}

// finishWithLoss writes base to work and opens it for writing, which
// finishes the kernel's drops in a commit, with the power cut at lp
// (counted from the open; never when lp.n == 0), then closes it, and
// returns what the disk holds afterwards (see lossOpener).
func finishWithLoss(t *testing.T, base *crashImage, work string, lp lossPoint, torn bool, rng *rand.Rand) *lossRun {
	t.Helper()
	base.save(t, work)
	mem := base.mem(t)
	run := &lossRun{armed: true}
	fsys, err := btrfs.OpenWritableWith(work, nil, blockdev.ScanOptions{Open: lossOpener(run, mem, lp, torn, rng)})
	if err == nil {
		err = fsys.Close()
	}
	run.err = err
	if run.disk == nil {
		run.disk = mem.CrashClone(rng) // everything was synced
	}
	return run
}

// finishLossPoints lists the losses to try for a run that made ops:
// every superblock write, the last sync (after which both superblocks
// may or may not be there), and two other writes or syncs drawn with
// rng; every write and sync when all.
func finishLossPoints(ops []blockdev.FaultOp, rng *rand.Rand, all bool) []lossPoint {
	supers := map[int64]bool{}
	for i := range disk.SuperMirrorMax {
		supers[int64(disk.SuperblockOffsetOf(i))] = true
	}
	var pts, others []lossPoint
	for i, op := range ops {
		lp := lossPoint{op: op.Op, n: op.N}
		if all || op.Op == blockdev.OpWrite && supers[op.Off] || i == len(ops)-1 && op.Op == blockdev.OpSync {
			pts = append(pts, lp)
		} else {
			others = append(others, lp)
		}
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	return append(pts, others[:min(len(others), 2)]...)
}

// ourSnapModelDiff walks dir with our reader and lists where it differs
// from want (names and contents): all of it, or when dirs is set only the
// names at the top of dir and what is under those of dirs.
func ourSnapModelDiff(t *testing.T, fsys *btrfs.FS, dir string, want snapModel, dirs map[string]bool) []string {
	t.Helper()
	walked := func(rel string) bool {
		top, _, below := strings.Cut(rel, "/")
		return dirs == nil || !below || dirs[top]
	}
	var d []string
	seen := map[string]bool{}
	err := fs.WalkDir(fsys, dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel := p[len(dir)+1:]
		seen[rel] = true
		w, ok := want[rel]
		switch {
		case !ok:
			d = append(d, "extra "+rel)
		case e.IsDir() != (w == "/"):
			d = append(d, rel+": directory or not")
		case e.IsDir() && !walked(rel+"/x"):
			return fs.SkipDir
		case !e.IsDir():
			b, err := fsys.ReadFile(p)
			if err != nil {
				return err
			}
			if string(b) != w {
				d = append(d, fmt.Sprintf("%s: %d bytes, want %d", rel, len(b), len(w)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if !seen[p] && walked(p) {
			d = append(d, "missing "+p)
		}
	}
	return d
}
