package btrfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/fsview"
	"github.com/gobtrfs/btrfs/mkfs"
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

// sharedCrashImage makes a filesystem of 4 KiB nodes for the power-loss
// tests of shared trees: sv holds 1500 small (inline) files in 16
// directories, a tree of three levels, and dsv 400 files in extents and
// inline, two levels. It returns the image and the files by path from
// the top level.
func sharedCrashImage(t *testing.T, rng *rand.Rand) (string, map[string][]byte) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 128 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, sv := range []struct {
		name string
		n    int
		big  bool
	}{{"sv", 1500, false}, {"dsv", 400, true}} {
		if _, err := w.CreateSubvolume(sv.name, nil); err != nil {
			t.Fatal(err)
		}
		for i := range sv.n {
			p := fmt.Sprintf("%s/d%02d/f%04d", sv.name, i%16, i)
			size := 20 + rng.IntN(400)
			if sv.big && i%3 == 0 {
				size = 4096 + rng.IntN(20000)
			}
			files[p] = crashData(rng, size)
			if err := w.MkdirAll(path.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteFile(p, files[p], 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for sv, want := range map[string]int{"sv": 2, "dsv": 1} {
		if lvl := subvolLevel(t, img, sv); lvl < want {
			t.Fatalf("%s: root level %d, want %d or more", sv, lvl, want)
		}
	}
	return img, files
}

// subvolLevel returns the level of the root block of subvolume sv.
func subvolLevel(t *testing.T, img, sv string) int {
	t.Helper()
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	id, err := fsys.SubvolumeAt(sv)
	if err != nil {
		t.Fatal(err)
	}
	trees, err := fsview.Of(fsys).Trees()
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trees {
		if uint64(tr.ID) == id {
			return tr.Root.Level
		}
	}
	t.Fatalf("no tree %d (%s) in the root tree", id, sv)
	return 0
}

// extentTreeHas fails the test unless dump-tree of img's extent tree
// shows every one of words.
func extentTreeHas(t *testing.T, img string, words ...string) {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "extent", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -t extent: %v\n%s", err, out)
	}
	for _, w := range words {
		if !strings.Contains(string(out), w) {
			t.Errorf("extent tree without %q", w)
		}
	}
}

// allFiles reads every regular file of fsys, subvolumes included, by path.
func allFiles(fsys *btrfs.FS) (map[string][]byte, error) {
	got := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := fsys.ReadFile(p)
		got[p] = b
		return err
	})
	return got, err
}

// snapshotFiles adds to files a copy of the files under src, as dst.
func snapshotFiles(files map[string][]byte, src, dst string) {
	for p, b := range maps.Clone(files) {
		if rest, ok := strings.CutPrefix(p, src+"/"); ok {
			files[dst+"/"+rest] = slices.Clone(b)
		}
	}
}

// sharedCrashState checks a disk after a loss: saved to path, it opens
// read-only and for writing, holds exactly the files (of every subvolume)
// of before or of after, and btrfs check --check-data-csum, 6.2 (with our
// checker) and 6.19, is clean. It returns "before" or "after".
func sharedCrashState(t *testing.T, run *lossRun, path string, before, after map[string][]byte, what string) string {
	t.Helper()
	st := crashStateOf(t, run, path, before, after, what, allFiles)
	btrfstest.CheckNewer(t, path, true)
	return st
}

// opRename renames a file.
func opRename(from, to string) dataOp {
	return dataOp{fmt.Sprintf("Rename %s %s", from, to),
		func(f *btrfs.FS) error { return f.Rename(from, to) },
		func(m map[string][]byte) { m[to] = m[from]; delete(m, from) }}
}

// sharedWriteOps draws n changes to the files of subvolume sv (creates
// and rewrites, inline when !big, partial writes, truncates, clones,
// renames, removes) spread over its directories, so that most of its
// leaves and the nodes above them are copied.
func sharedWriteOps(rng *rand.Rand, files map[string][]byte, sv string, n int, big bool) []dataOp {
	var ops []dataOp
	for i := 0; len(ops) < n; i++ {
		var names []string
		for _, p := range sortedNames(files) {
			if strings.HasPrefix(p, sv+"/") {
				names = append(names, p)
			}
		}
		name := names[rng.IntN(len(names))]
		var o dataOp
		switch k := rng.IntN(7); {
		case k == 0:
			size := rng.IntN(500)
			if big && rng.IntN(2) == 0 {
				size = 4096 + rng.IntN(30000)
			}
			o = opWriteFile(fmt.Sprintf("%s/d%02d/new%d", sv, rng.IntN(16), i), crashData(rng, size))
		case k == 1:
			o = opWriteFile(name, crashData(rng, rng.IntN(400)))
		case k == 2 && big:
			o = opWriteAt(name, crashData(rng, 1+rng.IntN(9000)), rng.Int64N(int64(len(files[name]))+1))
		case k == 3 && big:
			o = opTruncate(name, rng.Int64N(int64(len(files[name]))+1))
		case k == 4 && big:
			if src := names[rng.IntN(len(names))]; src != name && len(files[src]) >= 4096 {
				o = opClone(src, 0, name, 0, 4096)
			}
		case k == 5:
			o = opRename(name, fmt.Sprintf("%s/d%02d/mv%d", sv, rng.IntN(16), i))
		default:
			o = opRemove(name)
		}
		if o.do == nil {
			continue
		}
		o.apply(files)
		ops = append(ops, o)
	}
	return ops
}

// refusable wraps ops so that a refusal (ErrUnsupported: writes into a
// source whose shared leaves name data were, before references by parent
// leaf) changes nothing and is recorded in refused by the op's
// description, instead of failing the transaction.
func refusable(ops []dataOp, refused map[string]bool) []dataOp {
	out := make([]dataOp, len(ops))
	for i, o := range ops {
		do := o.do
		o.do = func(f *btrfs.FS) error {
			err := do(f)
			if errors.Is(err, btrfs.ErrUnsupported) {
				refused[o.desc] = true
				return nil
			}
			return err
		}
		out[i] = o
	}
	return out
}

// TestCrashDuringSharedWrites cuts the power during a commit of changes
// to trees that share blocks (issue 14, Tests): sv (three levels of
// inline files) and dsv (files in extents) are snapshotted (writable
// snap, read-only snap-ro; writable dsnap) and committed; then one
// transaction changes sv, snap, dsnap and dsv (dsv's leaves shared with
// dsnap name data: its copies take references by parent leaf; a change
// refused would be left out of the expected state, and is logged),
// copying shared leaves and nodes with
// the reference rules, and its commit, which applies the delayed
// tree-block references, is cut at every sync and superblock write and
// at sampled other writes (every write with GOBTRFS_LONG=1), whole and
// torn. Every crash image opens (also for writing), passes btrfs check
// --check-data-csum (6.2 and 6.19), and holds exactly the files of before
// or of after, read-only snapshot included.
func TestCrashDuringSharedWrites(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewPCG(testSeed(t), 16))
	img0, old := sharedCrashImage(t, rng)
	w, err := btrfs.OpenWritable(img0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		src, dst string
		ro       bool
	}{{"sv", "snap", false}, {"sv", "snap-ro", true}, {"dsv", "dsnap", false}} {
		if _, err := w.Snapshot(s.src, s.dst, &btrfs.SnapshotOptions{ReadOnly: s.ro}); err != nil {
			t.Fatal(err)
		}
		snapshotFiles(old, s.src, s.dst)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	base := readImage(t, img0)
	planned := cloneFiles(old)
	var ops []dataOp
	for _, s := range []struct {
		sv  string
		n   int
		big bool
	}{{"sv", 40, false}, {"snap", 40, true}, {"dsnap", 30, true}, {"dsv", 5, true}} {
		ops = append(ops, sharedWriteOps(rng, planned, s.sv, s.n, s.big)...)
	}
	refused := map[string]bool{}
	ops = refusable(ops, refused)
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")
	ref := runWithLoss(t, base, work, nil, nil, ops, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("without a power loss: %v", ref.err)
	}
	// The state after: the changes that were not refused.
	mid := cloneFiles(old)
	for _, o := range ops {
		if !refused[o.desc] {
			o.apply(mid)
		}
	}
	t.Logf("%d changes, %d refused", len(ops), len(refused))
	state := func(run *lossRun, what string) string {
		t.Helper()
		return sharedCrashState(t, run, check, old, mid, what)
	}
	if st := state(ref, "no loss"); st != "after" {
		t.Fatalf("without a power loss: state %s", st)
	}
	// The commit copied shared nodes and leaves by rule 2.
	extentTreeHas(t, check, "FULL_BACKREF", "shared block backref")
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
	if states["before"] == 0 {
		t.Errorf("states %v: no loss left the old state", states)
	}
}

// TestCrashDuringSharedDrop cuts the power during the commit of a drop of
// multi-level trees that share blocks at several levels: sv (three levels
// of inline files) has a read-only snapshot snap-ro and a writable one,
// snap; dsv (files in extents) a writable snapshot dsnap; a committed
// round of changes to sv, snap and dsnap copied most of their shared
// leaves and nodes (leaving FULL_BACKREF blocks and references by parent
// behind). Then one transaction deletes snap (its own copies freed, the
// blocks it still shares with sv losing its reference), snap-ro (the
// FULL_BACKREF blocks only it still reached freed, their children's
// references by parent dropped) and dsnap (its leaves' data references
// dropped), and its commit is cut at every sync and superblock write and
// at sampled other writes (every write with GOBTRFS_LONG=1), whole and
// torn. Every crash image opens (also for writing), passes btrfs check
// --check-data-csum (6.2 and 6.19), and holds all three snapshots or none,
// sv and dsv unchanged.
func TestCrashDuringSharedDrop(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewPCG(testSeed(t), 17))
	img0, files := sharedCrashImage(t, rng)
	w, err := btrfs.OpenWritable(img0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		src, dst string
		ro       bool
	}{{"sv", "snap", false}, {"sv", "snap-ro", true}, {"dsv", "dsnap", false}} {
		if _, err := w.Snapshot(s.src, s.dst, &btrfs.SnapshotOptions{ReadOnly: s.ro}); err != nil {
			t.Fatal(err)
		}
		snapshotFiles(files, s.src, s.dst)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	var ops []dataOp
	for _, s := range []struct {
		sv  string
		n   int
		big bool
	}{{"sv", 120, false}, {"snap", 120, true}, {"dsnap", 60, true}} {
		ops = append(ops, sharedWriteOps(rng, files, s.sv, s.n, s.big)...)
	}
	for _, o := range ops {
		if err := o.do(w); err != nil {
			t.Fatalf("%s: %v", o.desc, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img0}, true)
	// What the drop meets: blocks copied out of shared parents, and
	// references by parent below them.
	extentTreeHas(t, img0, "FULL_BACKREF", "shared block backref")
	base := readImage(t, img0)
	after := map[string][]byte{}
	for p, b := range files {
		if !strings.HasPrefix(p, "snap") && !strings.HasPrefix(p, "dsnap/") {
			after[p] = b
		}
	}
	drops := []dataOp{
		{desc: "delete snap", do: func(f *btrfs.FS) error { return f.DeleteSubvolume("snap") }},
		{desc: "delete snap-ro", do: func(f *btrfs.FS) error { return f.DeleteSubvolume("snap-ro") }},
		{desc: "delete dsnap", do: func(f *btrfs.FS) error { return f.DeleteSubvolume("dsnap") }},
	}
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")
	state := func(run *lossRun, what string) string {
		t.Helper()
		return sharedCrashState(t, run, check, files, after, what)
	}
	ref := runWithLoss(t, base, work, nil, nil, drops, lossPoint{}, false, rng)
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
		run := runWithLoss(t, base, work, nil, nil, drops, lp, i%2 == 1, rng)
		what := fmt.Sprintf("loss at %s %d", lp.op, lp.n)
		if !run.lost || run.err == nil {
			t.Fatalf("%s: lost %v, error %v: want the loss to fail the transaction", what, run.lost, run.err)
		}
		states[state(run, what)]++
	}
	t.Logf("states after the losses: %v", states)
	if states["before"] == 0 {
		t.Errorf("states %v: no loss left the old state", states)
	}
}
