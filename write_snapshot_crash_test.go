package btrfs_test

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestCrashDuringSnapshot cuts the power during a snapshot of a
// subvolume whose changes are not committed yet (so Snapshot commits
// them first, then the snapshot commits): at every sync and superblock
// write and at sampled other writes (all with GOBTRFS_LONG=1). Each crash
// image opens, passes btrfs check --check-data-csum, and is in one of the
// three states: the source as it was, the source with its new files and
// no snapshot, or both with the snapshot equal to the source.
func TestCrashDuringSnapshot(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewPCG(testSeed(t), 14))
	img0 := formatTemp(t, 128<<20)
	w, err := btrfs.OpenWritable(img0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.CreateSubvolume("sv", nil); err != nil {
		t.Fatal(err)
	}
	old := map[string][]byte{}
	for i := range 200 { // several leaves: the snapshot shares blocks
		p := fmt.Sprintf("sv/d%d/f%03d", i%10, i)
		old[p] = crashData(rng, 50+rng.IntN(3000))
		if err := w.MkdirAll(path.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteFile(p, old[p], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	base := readImage(t, img0)
	mid := cloneFiles(old)
	var ops []dataOp
	for i := range 5 {
		p := fmt.Sprintf("sv/new%d", i)
		data := crashData(rng, 100+rng.IntN(20000))
		mid[p] = data
		ops = append(ops, dataOp{desc: "write " + p, do: func(f *btrfs.FS) error { return f.WriteFile(p, data, 0o644) }})
	}
	ops = append(ops, dataOp{desc: "snapshot sv snap", do: func(f *btrfs.FS) error {
		_, err := f.Snapshot("sv", "snap", nil)
		return err
	}})
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")
	state := func(run *lossRun, what string) string {
		t.Helper()
		crashImageOf(t, run.disk, run.disk.Size()).save(t, check)
		fsys, err := btrfs.Open(check, nil)
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		src, err := treeFiles(fsys, "sv")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		snap, serr := treeFiles(fsys, "snap")
		fsys.Close()
		st := ""
		switch {
		case sameFileSet(src, old) && serr != nil:
			st = "before"
		case sameFileSet(src, mid) && serr != nil:
			st = "source committed"
		case sameFileSet(src, mid) && serr == nil && sameFileSet(snap, mid):
			st = "after"
		default:
			t.Fatalf("%s: not a state the snapshot passes through (snapshot: %v):\nsource vs old: %s\nsource vs new: %s",
				what, serr, fileSetDiff(src, old), fileSetDiff(src, mid))
		}
		wr, err := btrfs.OpenWritable(check, nil)
		if err != nil {
			t.Fatalf("%s: open for writing: %v", what, err)
		}
		wr.Close()
		btrfstest.Check(t, []string{check}, true)
		return st
	}
	ref := runWithLoss(t, base, work, nil, nil, ops, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("without a power loss: %v", ref.err)
	}
	if st := state(ref, "no loss"); st != "after" {
		t.Fatalf("without a power loss: state %s", st)
	}
	pts := dataLossPoints(ref.ops, rng, longTests())
	t.Logf("%d writes, %d syncs; trying %d loss points", ref.count[blockdev.OpWrite], ref.count[blockdev.OpSync], len(pts))
	states := map[string]int{}
	for i, lp := range pts {
		run := runWithLoss(t, base, work, nil, nil, ops, lp, i%2 == 1, rng)
		what := fmt.Sprintf("loss at %s %d", lp.op, lp.n)
		if !run.lost || run.err == nil {
			t.Fatalf("%s: lost %v, error %v: want the loss to fail the transaction", what, run.lost, run.err)
		}
		states[state(run, what)]++
	}
	t.Logf("states after the losses: %v", states)
	if states["before"] == 0 || states["source committed"] == 0 {
		t.Errorf("states %v: want losses before the first commit and between the two", states)
	}
}

// treeFiles reads every regular file under dir of fsys, by path.
func treeFiles(fsys *btrfs.FS, dir string) (map[string][]byte, error) {
	got := map[string][]byte{}
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		// Keyed as under sv, so the snapshot compares with the source.
		got["sv"+p[len(dir):]] = b
		return nil
	})
	return got, err
}

// TestCrashDuringSubvolumeDelete cuts the power while a commit deletes a
// snapshot (its shared blocks lose a reference) and a subvolume of its
// own blocks and data (freed): every crash image opens, passes btrfs
// check --check-data-csum, and holds both or neither, the source intact.
func TestCrashDuringSubvolumeDelete(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewPCG(testSeed(t), 15))
	img0 := formatTemp(t, 128<<20)
	w, err := btrfs.OpenWritable(img0, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, sv := range []string{"sv", "sv2"} {
		if _, err := w.CreateSubvolume(sv, nil); err != nil {
			t.Fatal(err)
		}
		for i := range 150 {
			p := fmt.Sprintf("%s/d%d/f%03d", sv, i%10, i)
			data := crashData(rng, 50+rng.IntN(3000))
			if sv == "sv" {
				files[p] = data
			}
			if err := w.MkdirAll(path.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := w.Snapshot("sv", "snap", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	base := readImage(t, img0)
	ops := []dataOp{
		{desc: "delete snap", do: func(f *btrfs.FS) error { return f.DeleteSubvolume("snap") }},
		{desc: "delete sv2", do: func(f *btrfs.FS) error { return f.DeleteSubvolume("sv2") }},
	}
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")
	state := func(run *lossRun, what string) string {
		t.Helper()
		crashImageOf(t, run.disk, run.disk.Size()).save(t, check)
		fsys, err := btrfs.Open(check, nil)
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		src, err := treeFiles(fsys, "sv")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		_, snapErr := fsys.Lstat("snap")
		_, sv2Err := fsys.Lstat("sv2")
		fsys.Close()
		if !sameFileSet(src, files) {
			t.Fatalf("%s: the source changed: %s", what, fileSetDiff(src, files))
		}
		st := ""
		switch {
		case snapErr == nil && sv2Err == nil:
			st = "before"
		case snapErr != nil && sv2Err != nil:
			st = "after"
		default:
			t.Fatalf("%s: one deletion without the other (snap: %v, sv2: %v)", what, snapErr, sv2Err)
		}
		wr, err := btrfs.OpenWritable(check, nil)
		if err != nil {
			t.Fatalf("%s: open for writing: %v", what, err)
		}
		wr.Close()
		btrfstest.Check(t, []string{check}, true)
		return st
	}
	ref := runWithLoss(t, base, work, nil, nil, ops, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("without a power loss: %v", ref.err)
	}
	if st := state(ref, "no loss"); st != "after" {
		t.Fatalf("without a power loss: state %s", st)
	}
	pts := dataLossPoints(ref.ops, rng, longTests())
	states := map[string]int{}
	for i, lp := range pts {
		run := runWithLoss(t, base, work, nil, nil, ops, lp, i%2 == 1, rng)
		what := fmt.Sprintf("loss at %s %d", lp.op, lp.n)
		if !run.lost || run.err == nil {
			t.Fatalf("%s: lost %v, error %v: want the loss to fail the transaction", what, run.lost, run.err)
		}
		states[state(run, what)]++
	}
	t.Logf("%d loss points, states %v", len(pts), states)
	if states["before"] == 0 {
		t.Errorf("states %v: no loss left the old state", states)
	}
}
