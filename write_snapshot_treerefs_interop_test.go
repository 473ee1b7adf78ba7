//go:build linux

package btrfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/mkfs"
)

// keyedTreeRefs counts the tree-block references the extent tree of img
// keeps as items of their own, TREE_BLOCK_REF and SHARED_BLOCK_REF
// items, as dump-tree lists them.
func keyedTreeRefs(t *testing.T, img string) (tree, shared int) {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "extent", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -t extent: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.Contains(line, " key (") && strings.Contains(line, " TREE_BLOCK_REF "):
			tree++
		case strings.Contains(line, " key (") && strings.Contains(line, " SHARED_BLOCK_REF "):
			shared++
		}
	}
	return tree, shared
}

// treeRefsSession is what the two tests below share: an image, a model
// per subvolume, our writer's changes recorded in both, and the check
// after a commit.
type treeRefsSession struct {
	t      *testing.T
	img    string
	models map[string]snapModel
}

func (s *treeRefsSession) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *treeRefsSession) open() *btrfs.FS {
	s.t.Helper()
	w, err := btrfs.OpenWritable(s.img, nil)
	s.must(err)
	return w
}

func (s *treeRefsSession) write(w *btrfs.FS, sv, name, content string) {
	s.t.Helper()
	s.must(w.WriteFile(sv+"/"+name, []byte(content), 0o644))
	s.models[sv][name] = content
}

func (s *treeRefsSession) remove(w *btrfs.FS, sv, name string) {
	s.t.Helper()
	s.must(w.Remove(sv + "/" + name))
	delete(s.models[sv], name)
}

func (s *treeRefsSession) snapshot(w *btrfs.FS, src, dst string, ro bool) {
	s.t.Helper()
	_, err := w.Snapshot(src, dst, &btrfs.SnapshotOptions{ReadOnly: ro})
	s.must(err)
	s.models[dst] = maps.Clone(s.models[src])
}

func (s *treeRefsSession) delete(w *btrfs.FS, sv string) {
	s.t.Helper()
	s.must(w.DeleteSubvolume(sv))
	delete(s.models, sv)
}

// check runs btrfs check 6.2 (with our checker) and 6.19 on the image,
// with data checksums, and compares the kernel's read-only view of the
// subvolumes named (all when none) with their models.
func (s *treeRefsSession) check(round string, svs ...string) {
	t := s.t
	t.Helper()
	start := time.Now()
	btrfstest.Check(t, []string{s.img}, true)
	btrfstest.CheckNewer(t, s.img, true)
	if len(svs) == 0 {
		svs = slices.Sorted(maps.Keys(s.models))
	}
	dir := btrfstest.Mount(t, "ro", s.img)
	for _, sv := range svs {
		got := scanSnapModel(t, filepath.Join(dir, sv))
		if d := snapModelDiff(s.models[sv], got); len(d) > 0 {
			t.Errorf("%s: kernel's %s differs from the model: %q", round, sv, d)
		}
	}
	btrfstest.Unmount(t, dir)
	t.Logf("%s: checks and the kernel's view of %d subvolumes in %v", round, len(svs), time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		t.FailNow()
	}
}

// TestSnapshotTreeRefsInterop makes so many snapshots of one subvolume
// of three levels (4 KiB nodes) that the references of its root's
// children no longer fit their extent items and go into items of their
// own (TREE_BLOCK_REF keyed by root, issue 14), and writes into the
// source and snapshots until blocks also carry many references by parent
// (SHARED_BLOCK_REF items of their own: trees that own copies of a shared
// node, snapshotted and then written, give that node's children a
// reference by each copy's address). Then snapshots and the source are
// deleted and the survivors written, and at last everything goes. After
// each step btrfs check 6.2 (and our checker) and 6.19 with data
// checksums are clean and the kernel's view of some subvolumes equals
// their models; the extent tree is asserted to hold both kinds of items
// on the way and none at the end.
func TestSnapshotTreeRefsInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	s := &treeRefsSession{t: t, img: img, models: map[string]snapModel{"src": {}}}
	small := func(i int) string { return strings.Repeat(fmt.Sprintf("s%d.", i), 1+i%40) }
	big := func(i int) string { return strings.Repeat(fmt.Sprintf("big %d|", i), 900+i%50) }
	w := s.open()
	_, err := w.CreateSubvolume("src", nil)
	s.must(err)
	for d := range 10 {
		s.must(w.Mkdir(fmt.Sprintf("src/d%d", d), 0o755))
		s.models["src"][fmt.Sprintf("d%d", d)] = "/"
	}
	for i := range 1500 {
		s.write(w, "src", fmt.Sprintf("d%d/f%04d", i%10, i), small(i))
		if i%15 == 0 {
			s.write(w, "src", fmt.Sprintf("d%d/b%04d", i%10, i), big(i))
		}
	}
	s.must(w.Close())
	if lvl := rootLevel(t, img, "src"); lvl < 2 {
		t.Fatalf("src: root level %d, want three levels or more", lvl)
	}

	// 40 snapshots of src (every fourth read-only) and 8 snapshots of
	// snapshots: the root's children get 49 references each, 22 inline.
	start := time.Now()
	w = s.open()
	var rw []string
	for i := range 40 {
		name := fmt.Sprintf("s%02d", i)
		s.snapshot(w, "src", name, i%4 == 3)
		if i%4 != 3 {
			rw = append(rw, name)
		}
	}
	for i := range 8 {
		s.snapshot(w, fmt.Sprintf("s%02d", i*5), fmt.Sprintf("s%02d-snap", i*5), i%2 == 1)
	}
	s.must(w.Close())
	t.Logf("48 snapshots in %v", time.Since(start).Round(time.Millisecond))
	tree, shared := keyedTreeRefs(t, img)
	if tree == 0 {
		t.Fatalf("48 snapshots: no TREE_BLOCK_REF item in the extent tree")
	}
	t.Logf("after the snapshots: %d TREE_BLOCK_REF items, %d SHARED_BLOCK_REF items", tree, shared)
	s.check("snapshots", "src", "s00", "s03", "s35-snap", "s39")

	// Round 1: the source and the writable snapshots write into d0
	// (so each copies the same shared node below the root: src by rule
	// 2, the others by rule 3, adding keyed references to its
	// children one per tree) and elsewhere.
	w = s.open()
	for j, sv := range append([]string{"src"}, rw...) {
		s.write(w, sv, fmt.Sprintf("d0/n%d", j), small(j))
		if j%3 == 0 {
			s.write(w, sv, fmt.Sprintf("d%d/nb%d", j%10, j), big(j))
			s.remove(w, sv, fmt.Sprintf("d%d/f%04d", (j+1)%10, 10*j+(j+1)%10))
		}
	}
	s.must(w.Close())
	s.check("round 1", "src", "s00", "s01", "s05-snap", "s38")

	// Snapshots of the writable snapshots that own copies of that
	// node, then writes into d0 of them again: rule 2 on each copy
	// gives the node's children a reference by the copy's address, so
	// they carry one per snapshot written, past the inline room.
	w = s.open()
	for _, sv := range rw[:26] {
		s.snapshot(w, sv, sv+"-t", true)
	}
	s.must(w.Close())
	w = s.open()
	for j, sv := range rw[:26] {
		s.write(w, sv, fmt.Sprintf("d0/m%d", j), small(j+100))
	}
	s.must(w.Close())
	tree, shared = keyedTreeRefs(t, img)
	t.Logf("after round 2: %d TREE_BLOCK_REF items, %d SHARED_BLOCK_REF items", tree, shared)
	if tree == 0 || shared == 0 {
		t.Errorf("round 2: %d TREE_BLOCK_REF items and %d SHARED_BLOCK_REF items, want both", tree, shared)
	}
	s.check("round 2", "src", "s00", "s00-t", "s10", "s30-t")

	// Deletions: read-only and writable snapshots, snapshots whose own
	// snapshots outlive them, and the source; then the survivors write.
	w = s.open()
	for _, sv := range []string{"s01", "s02", "s03", "s07", "s10-snap", "s15-snap", "s20", "s21-t", "s33", "s34", "s36", "s39", "s05"} {
		s.delete(w, sv)
	}
	s.delete(w, "src")
	s.must(w.Close())
	s.check("deletions", "s00", "s00-snap", "s05-snap", "s05-t", "s09-t")
	w = s.open()
	for j, sv := range []string{"s00", "s00-snap", "s20-snap", "s06", "s09", "s29", "s38"} {
		s.write(w, sv, fmt.Sprintf("d0/p%d", j), big(j+200))
		s.write(w, sv, fmt.Sprintf("d%d/q%d", j%10, j), small(j+200))
		s.remove(w, sv, fmt.Sprintf("d%d/f%04d", j%10, 100+j%10))
	}
	s.must(w.Close())
	s.check("round 3", "s00", "s00-snap", "s20-snap", "s05-snap", "s06", "s09", "s38", "s09-t")

	// Everything goes: no reference of either kind is left.
	w = s.open()
	for _, sv := range slices.Sorted(maps.Keys(s.models)) {
		s.delete(w, sv)
	}
	s.must(w.Close())
	s.check("all deleted")
	tree, shared = keyedTreeRefs(t, img)
	if tree != 0 || shared != 0 {
		t.Errorf("every subvolume deleted: %d TREE_BLOCK_REF items and %d SHARED_BLOCK_REF items left", tree, shared)
	}
}

// TestKernelSnapshotsTreeRefsInterop is the reverse: the kernel makes
// many snapshots of a subvolume of three levels (so it keeps the
// references of the root's children as items of their own), then our
// writer writes into the source and snapshots, deletes some (the source
// too) and writes again; btrfs check stays clean and the kernel's view
// equals the models.
func TestKernelSnapshotsTreeRefsInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	s := &treeRefsSession{t: t, img: img, models: map[string]snapModel{}}
	small := func(i int) string { return strings.Repeat(fmt.Sprintf("k%d.", i), 1+i%40) }
	big := func(i int) string { return strings.Repeat(fmt.Sprintf("kbig %d|", i), 900+i%50) }
	start := time.Now()
	mnt := btrfstest.Mount(t, "", img)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("btrfs", args...).CombinedOutput(); err != nil {
			t.Fatalf("btrfs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("subvolume", "create", filepath.Join(mnt, "src"))
	m := snapModel{}
	for d := range 10 {
		s.must(os.Mkdir(filepath.Join(mnt, "src", fmt.Sprintf("d%d", d)), 0o755))
		m[fmt.Sprintf("d%d", d)] = "/"
	}
	for i := range 1500 {
		name := fmt.Sprintf("d%d/f%04d", i%10, i)
		s.must(os.WriteFile(filepath.Join(mnt, "src", name), []byte(small(i)), 0o644))
		m[name] = small(i)
		if i%15 == 0 {
			name := fmt.Sprintf("d%d/b%04d", i%10, i)
			s.must(os.WriteFile(filepath.Join(mnt, "src", name), []byte(big(i)), 0o644))
			m[name] = big(i)
		}
	}
	s.models["src"] = m
	run("filesystem", "sync", mnt)
	var rw []string
	for i := range 36 {
		name := fmt.Sprintf("k%02d", i)
		args := []string{"subvolume", "snapshot"}
		if i%3 == 2 {
			args = append(args, "-r")
		} else {
			rw = append(rw, name)
		}
		run(append(args, filepath.Join(mnt, "src"), filepath.Join(mnt, name))...)
		s.models[name] = maps.Clone(m)
	}
	for i := range 6 {
		src := fmt.Sprintf("k%02d", i*6)
		run("subvolume", "snapshot", filepath.Join(mnt, src), filepath.Join(mnt, src+"-snap"))
		s.models[src+"-snap"] = maps.Clone(m)
	}
	btrfstest.Unmount(t, mnt)
	t.Logf("kernel: source and 42 snapshots in %v", time.Since(start).Round(time.Millisecond))
	if lvl := rootLevel(t, img, "src"); lvl < 2 {
		t.Fatalf("src: root level %d, want three levels or more", lvl)
	}
	tree, shared := keyedTreeRefs(t, img)
	t.Logf("the kernel's image: %d TREE_BLOCK_REF items, %d SHARED_BLOCK_REF items", tree, shared)
	if tree == 0 {
		t.Fatalf("the kernel's 42 snapshots: no TREE_BLOCK_REF item in the extent tree")
	}

	w := s.open()
	for j, sv := range append([]string{"src"}, rw...) {
		s.write(w, sv, fmt.Sprintf("d0/n%d", j), small(j+50))
		if j%4 == 0 {
			s.write(w, sv, fmt.Sprintf("d%d/nb%d", j%10, j), big(j))
			s.remove(w, sv, fmt.Sprintf("d%d/f%04d", (j+3)%10, 10*j+(j+3)%10))
		}
	}
	s.must(w.Close())
	s.check("round 1", "src", "k00", "k02", "k06-snap", "k34")

	w = s.open()
	for _, sv := range []string{"k01", "k02", "k05", "k11", "k12-snap", "k20", "k30", "src"} {
		s.delete(w, sv)
	}
	s.must(w.Close())
	s.check("deletions", "k00", "k06", "k12", "k30-snap", "k35")

	w = s.open()
	for j, sv := range []string{"k00", "k03", "k12", "k30-snap", "k34"} {
		s.write(w, sv, fmt.Sprintf("d%d/p%d", j%10, j), big(j+300))
		s.remove(w, sv, fmt.Sprintf("d%d/f%04d", j%10, 200+j%10))
	}
	s.snapshot(w, "k34", "k34-ours", false)
	s.must(w.Close())
	w = s.open()
	s.write(w, "k34-ours", "d0/ours", small(7))
	s.delete(w, "k04")
	s.delete(w, "k06")
	s.must(w.Close())
	s.check("round 2", "k00", "k03", "k12", "k30-snap", "k34", "k34-ours", "k06-snap")
}

// TestCrashDuringManySnapshotWrites cuts the power during the commit of
// changes to a tree whose shared blocks keep references as items of their
// own: sv (three levels of inline files and some in extents) has 24
// writable snapshots and 4 read-only ones, so the nodes below its root
// carry 29 references, 7 of them items (asserted). One transaction then
// changes sv and two snapshots at random and makes every writable
// snapshot create a file in the same directory (each copies the same
// shared node by rule 3, adding a reference keyed by it to that node's
// children: 24 of them, past the inline room), and deletes two read-only
// snapshots (one's references are items); its commit is cut at every
// sync and superblock write and at sampled other writes (every write with
// GOBTRFS_LONG=1; maxManySnapLosses points in all without), whole and
// torn. Every crash image opens (also for writing), passes btrfs check
// --check-data-csum 6.2 (with our checker) and 6.19, and holds the files
// of before or of after in sv, the changed snapshots, the deleted ones
// and an untouched one (the others are left to check, which counts
// their references). Nothing is refused.
func TestCrashDuringManySnapshotWrites(t *testing.T) {
	const maxManySnapLosses = 8
	btrfstest.RequireProgs(t)
	start := time.Now()
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 18))
	img0 := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img0, mkfs.Options{Size: 128 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	w, err := btrfs.OpenWritable(img0, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	if _, err := w.CreateSubvolume("sv", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 1500 {
		p := fmt.Sprintf("sv/d%02d/f%04d", i%16, i)
		size := 20 + rng.IntN(400)
		if i%10 == 0 {
			size = 4096 + rng.IntN(8000)
		}
		files[p] = crashData(rng, size)
		if err := w.MkdirAll(path.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteFile(p, files[p], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	var rw []string
	for i := range 28 {
		name := fmt.Sprintf("w%02d", i)
		ro := i%7 == 6
		if ro {
			name = fmt.Sprintf("r%02d", i)
		} else {
			rw = append(rw, name)
		}
		if _, err := w.Snapshot("sv", name, &btrfs.SnapshotOptions{ReadOnly: ro}); err != nil {
			t.Fatal(err)
		}
		snapshotFiles(files, "sv", name)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if lvl := subvolLevel(t, img0, "sv"); lvl < 2 {
		t.Fatalf("sv: root level %d, want three levels or more", lvl)
	}
	tree0, _ := keyedTreeRefs(t, img0)
	if tree0 == 0 {
		t.Fatal("28 snapshots: no TREE_BLOCK_REF item in the extent tree")
	}
	t.Logf("sv and 28 snapshots made in %v", time.Since(start).Round(time.Millisecond))
	base := readImage(t, img0)
	planned := cloneFiles(files)
	var ops []dataOp
	ops = append(ops, sharedWriteOps(rng, planned, "sv", 20, true)...)
	ops = append(ops, sharedWriteOps(rng, planned, rw[0], 10, true)...)
	ops = append(ops, sharedWriteOps(rng, planned, rw[len(rw)-1], 6, true)...)
	for i, sv := range rw {
		ops = append(ops, opWriteFile(fmt.Sprintf("%s/d00/many%d", sv, i), crashData(rng, 30+i)))
	}
	for _, sv := range []string{"r06", "r27"} {
		ops = append(ops, dataOp{desc: "delete " + sv,
			do: func(f *btrfs.FS) error { return f.DeleteSubvolume(sv) },
			apply: func(m map[string][]byte) {
				for p := range m {
					if strings.HasPrefix(p, sv+"/") {
						delete(m, p)
					}
				}
			}})
	}
	refused := map[string]bool{}
	ops = refusable(ops, refused)
	watched := []string{"sv", rw[0], rw[len(rw)-1], "r06", "r13", "r27"}
	pick := func(m map[string][]byte) map[string][]byte {
		out := map[string][]byte{}
		for p, b := range m {
			if slices.Contains(watched, strings.SplitN(p, "/", 2)[0]) {
				out[p] = b
			}
		}
		return out
	}
	readWatched := func(fsys *btrfs.FS) (map[string][]byte, error) {
		got := map[string][]byte{}
		for _, sv := range watched {
			err := fs.WalkDir(fsys, sv, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				b, err := fsys.ReadFile(p)
				got[p] = b
				return err
			})
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
		return got, nil
	}
	mid := cloneFiles(files)
	for _, o := range ops {
		o.apply(mid)
	}
	before, after := pick(files), pick(mid)
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")
	state := func(run *lossRun, what string) string {
		t.Helper()
		st := crashStateOf(t, run, check, before, after, what, readWatched)
		btrfstest.CheckNewer(t, check, true)
		return st
	}
	ref := runWithLoss(t, base, work, nil, nil, ops, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("without a power loss: %v", ref.err)
	}
	if len(refused) != 0 {
		t.Fatalf("seed %d: %d changes refused: %v", seed, len(refused), slices.Sorted(maps.Keys(refused)))
	}
	if st := state(ref, "no loss"); st != "after" {
		t.Fatalf("without a power loss: state %s", st)
	}
	tree1, shared1 := keyedTreeRefs(t, check)
	t.Logf("TREE_BLOCK_REF items: %d before the commit, %d after (SHARED_BLOCK_REF items %d)", tree0, tree1, shared1)
	if tree1 <= tree0 {
		t.Errorf("the commit added no TREE_BLOCK_REF item (%d before, %d after)", tree0, tree1)
	}
	pts := dataLossPoints(ref.ops, rng, longTests())
	if !longTests() && len(pts) > maxManySnapLosses {
		// The syncs, the superblock writes and the last write, then
		// the others dataLossPoints chose, up to the bound.
		key := map[lossPoint]bool{}
		for _, op := range ref.ops {
			if op.Op == blockdev.OpSync || op.Op == blockdev.OpWrite && isSuperOffset(op.Off) {
				key[lossPoint{op: op.Op, n: op.N}] = true
			}
		}
		key[lossPoint{op: blockdev.OpWrite, n: ref.count[blockdev.OpWrite]}] = true
		var short []lossPoint
		for _, first := range []bool{true, false} {
			for _, lp := range pts {
				if key[lp] == first && len(short) < maxManySnapLosses {
					short = append(short, lp)
				}
			}
		}
		pts = short
	}
	t.Logf("seed %d: %d changes, %d writes, %d syncs; trying %d loss points: %v", seed, len(ops), ref.count[blockdev.OpWrite], ref.count[blockdev.OpSync], len(pts), pts)
	states := map[string]int{}
	for i, lp := range pts {
		run := runWithLoss(t, base, work, nil, nil, ops, lp, i%2 == 1, rng)
		what := fmt.Sprintf("loss at %s %d", lp.op, lp.n)
		if !run.lost || run.err == nil {
			t.Fatalf("%s: lost %v, error %v: want the loss to fail the transaction", what, run.lost, run.err)
		}
		states[state(run, what)]++
	}
	t.Logf("states after the losses: %v (%v in all)", states, time.Since(start).Round(time.Millisecond))
	if states["before"] == 0 {
		t.Errorf("states %v: no loss left the old state", states)
	}
}

// isSuperOffset reports whether off is where a superblock copy lives.
func isSuperOffset(off int64) bool {
	for i := 0; i < disk.SuperMirrorMax; i++ {
		if off == int64(disk.SuperblockOffsetOf(i)) {
			return true
		}
	}
	return false
}
