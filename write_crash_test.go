package btrfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/mkfs"
)

// errPowerLost is what the device returns for every write and sync from
// the loss on.
var errPowerLost = errors.New("power lost")

// lossPoint is where the power goes: just before the n-th write or sync
// (counted from 1 from the opening of the image) is carried out; n == 0
// is never.
type lossPoint struct {
	op blockdev.Op
	n  int
}

// lossRun is what one transaction with a power loss left behind.
type lossRun struct {
	mu    sync.Mutex
	ops   []blockdev.FaultOp // writes and syncs attempted
	count [3]int
	armed bool // counting: the first transaction is committed
	lost  bool
	disk  *blockdev.Mem // the crash image (or the final state without a loss)
	err   error         // the first error of an operation or Commit
}

// dataOp is one file-data operation of the transaction, with its effect
// on the model.
type dataOp struct {
	desc  string
	do    func(*btrfs.FS) error
	apply func(files map[string][]byte)
}

// crashConfig is one image and write-option set the test runs.
type crashConfig struct {
	name string
	mkfs btrfstest.MkfsOptions
	opts btrfs.Options
	// ours formats with our mkfs instead (its defaults: mkfs.btrfs
	// 6.19's, with the block-group tree, which 6.2 cannot make).
	ours bool
}

var crashConfigs = []crashConfig{
	{name: "4k-xxhash", mkfs: btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096, Csum: "xxhash"}},
	{name: "16k-crc32c-dupmeta-zstd", mkfs: btrfstest.MkfsOptions{Size: 128 << 20, MetadataProfile: "dup"}, opts: btrfs.Options{Compress: "zstd"}},
	// The block group items in tree 11.
	{name: "block-group-tree", mkfs: btrfstest.MkfsOptions{Size: 128 << 20}, ours: true},
	// Tree blocks as EXTENT_ITEMs with a tree block info.
	{name: "no-skinny", mkfs: btrfstest.MkfsOptions{Size: 128 << 20, Features: "^skinny-metadata"}},
	// Data and metadata in DATA|METADATA groups (4 KiB nodes).
	{name: "mixed", mkfs: btrfstest.MkfsOptions{Size: 128 << 20, Extra: []string{"--mixed"}}},
	// Quotas on (qgroups as mkfs.btrfs counts them): the first commit
	// marks them inconsistent (docs/design/0021).
	{name: "quota", mkfs: btrfstest.MkfsOptions{Size: 128 << 20, Extra: []string{"-R", "quota"}}},
}

// TestCrashDuringDataOps runs random file-data operations in one
// transaction on an image whose transaction side writes through a
// recording device (teeDevice), and cuts the power at every sync, every
// superblock write, the first and last write and the writes next to
// syncs, and a random sample of the other writes (all of them with
// GOBTRFS_LONG=1): those of the operations, which write data extents
// before Commit, and those of Commit. Whole and torn writes alternate
// (both at every point with GOBTRFS_LONG=1). Each crash image must open (read-only and for writing),
// pass btrfs check --check-data-csum, and hold exactly the files before
// or after the transaction.
func TestCrashDuringDataOps(t *testing.T) {
	btrfstest.RequireProgs(t)
	seed := testSeed(t)
	for ci, cfg := range crashConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(ci)))
			testCrashConfig(t, cfg, rng)
		})
	}
}

func testCrashConfig(t *testing.T, cfg crashConfig, rng *rand.Rand) {
	var img0 string
	if cfg.ours {
		img0 = filepath.Join(t.TempDir(), "ours.img")
		if err := mkfs.Format(img0, mkfs.Options{Size: cfg.mkfs.Size, NodeSize: cfg.mkfs.NodeSize}); err != nil {
			t.Fatal(err)
		}
	} else {
		img0 = btrfstest.Mkfs(t, cfg.mkfs)
	}
	// A first transaction is committed in the same session (no loss), so
	// the one under test starts from the state a Commit leaves in memory.
	pre, before := genDataOps(rng, crashBase(t, img0, &cfg.opts, rng), 8)
	base := readImage(t, img0)
	ops, after := genDataOps(rng, before, 14)
	for _, o := range append(slices.Clone(pre), ops...) {
		t.Logf("op: %s", o.desc)
	}
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")

	ref := runWithLoss(t, base, work, &cfg.opts, pre, ops, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("transaction without a power loss: %v", ref.err)
	}
	if st := crashState(t, ref, check, before, after, "no loss"); st != "after" {
		t.Fatalf("transaction without a power loss left the %s state", st)
	}
	pts := dataLossPoints(ref.ops, rng, longTests())
	t.Logf("transaction made %d writes, %d syncs; trying %d loss points",
		ref.count[blockdev.OpWrite], ref.count[blockdev.OpSync], len(pts))
	states := map[string]int{}
	trials := 1 // whole and torn writes alternate; both at every point when long
	if longTests() {
		trials = 2
	}
	for i, lp := range pts {
		for trial := range trials {
			torn := (i+trial)%2 == 1
			run := runWithLoss(t, base, work, &cfg.opts, pre, ops, lp, torn, rng)
			what := fmt.Sprintf("loss at %s %d (torn %v)", lp.op, lp.n, torn)
			if !run.lost {
				t.Fatalf("%s: the loss point was not reached (the writes are not deterministic?)", what)
			}
			if run.err == nil {
				t.Fatalf("%s: the transaction succeeded although the power was lost", what)
			}
			states[crashState(t, run, check, before, after, what)]++
		}
	}
	t.Logf("after the losses: %d times the old state, %d times the new", states["before"], states["after"])
	if states["before"] == 0 && !sameFileSet(before, after) {
		t.Error("no power loss left the old state")
	}
}

// crashBase fills img with a few files (committed) and returns them.
func crashBase(t *testing.T, img string, opts *btrfs.Options, rng *rand.Rand) map[string][]byte {
	t.Helper()
	fsys, err := btrfs.OpenWritable(img, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	files := map[string][]byte{}
	for i := range 6 {
		name := fmt.Sprintf("f%d", i)
		data := crashData(rng, []int{0, 100, 3000, 4096, 70000, 300000}[i])
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	// A file with holes.
	if err := fsys.Truncate("f3", 1<<20); err != nil {
		t.Fatal(err)
	}
	files["f3"] = append(files["f3"], make([]byte, 1<<20-len(files["f3"]))...)
	d := crashData(rng, 8192)
	if _, err := fsys.WriteAt("f3", d, 512<<10); err != nil {
		t.Fatal(err)
	}
	copy(files["f3"][512<<10:], d)
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	return files
}

// crashData is n bytes, random or compressible (half of the time).
func crashData(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	if rng.IntN(2) == 0 {
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	word := []byte(fmt.Sprintf("gobtrfs %d ", rng.IntN(1000)))
	for i := range b {
		b[i] = word[i%len(word)]
	}
	return b
}

// genDataOps draws n operations on the files of before and returns them
// with the files after them.
func genDataOps(rng *rand.Rand, before map[string][]byte, n int) ([]dataOp, map[string][]byte) {
	files := cloneFiles(before)
	var ops []dataOp
	next := 0
	for len(ops) < n {
		names := sortedNames(files)
		var o dataOp
		switch k := rng.IntN(8); {
		case k == 0 || len(names) == 0:
			name := fmt.Sprintf("new%d", next)
			next++
			if len(names) > 0 && rng.IntN(3) == 0 {
				name = names[rng.IntN(len(names))] // rewrite
			}
			o = opWriteFile(name, crashData(rng, []int{0, 500, 4096, 100000, 600000}[rng.IntN(5)]))
		default:
			name := names[rng.IntN(len(names))]
			o = randomFileOp(rng, k, name, names, files)
		}
		if o.do == nil {
			continue
		}
		o.apply(files)
		ops = append(ops, o)
	}
	return ops, files
}

// randomFileOp draws operation k (1..7) on the existing file name.
func randomFileOp(rng *rand.Rand, k int, name string, names []string, files map[string][]byte) dataOp {
	size := int64(len(files[name]))
	off := rng.Int64N(size + 65536)
	switch k {
	case 1, 2:
		return opWriteAt(name, crashData(rng, 1+rng.IntN(200000)), off)
	case 3:
		return opTruncate(name, rng.Int64N(size+200000))
	case 4:
		return opPunch(name, off, 1+rng.Int64N(300000))
	case 5:
		return opFallocate(name, off, 1+rng.Int64N(300000), rng.IntN(2) == 0)
	case 6:
		src := names[rng.IntN(len(names))]
		srcBlocks := int64(len(files[src])) / 4096
		if src == name || srcBlocks == 0 {
			return dataOp{}
		}
		so := rng.Int64N(srcBlocks)
		length := 1 + rng.Int64N(srcBlocks-so)
		do := rng.Int64N((size+4095)/4096 + 1)
		return opClone(src, so*4096, name, do*4096, length*4096)
	default:
		return opRemove(name)
	}
}

func cloneFiles(m map[string][]byte) map[string][]byte {
	c := make(map[string][]byte, len(m))
	for k, v := range m {
		c[k] = slices.Clone(v)
	}
	return c
}

func sortedNames(m map[string][]byte) []string { return slices.Sorted(maps.Keys(m)) }

// grow extends b with zeros to n bytes.
func grow(b []byte, n int64) []byte {
	if int64(len(b)) < n {
		b = append(b, make([]byte, n-int64(len(b)))...)
	}
	return b
}

func opWriteFile(name string, data []byte) dataOp {
	return dataOp{fmt.Sprintf("WriteFile %s %d bytes", name, len(data)),
		func(f *btrfs.FS) error { return f.WriteFile(name, data, 0o644) },
		func(m map[string][]byte) { m[name] = slices.Clone(data) }}
}

func opWriteAt(name string, data []byte, off int64) dataOp {
	return dataOp{fmt.Sprintf("WriteAt %s [%d,+%d)", name, off, len(data)),
		func(f *btrfs.FS) error { _, err := f.WriteAt(name, data, off); return err },
		func(m map[string][]byte) {
			b := grow(m[name], off+int64(len(data)))
			copy(b[off:], data)
			m[name] = b
		}}
}

func opTruncate(name string, size int64) dataOp {
	return dataOp{fmt.Sprintf("Truncate %s %d", name, size),
		func(f *btrfs.FS) error { return f.Truncate(name, size) },
		func(m map[string][]byte) { m[name] = grow(m[name], size)[:size] }}
}

func opPunch(name string, off, length int64) dataOp {
	return dataOp{fmt.Sprintf("PunchHole %s [%d,+%d)", name, off, length),
		func(f *btrfs.FS) error { return f.PunchHole(name, off, length) },
		func(m map[string][]byte) {
			b := m[name]
			for i := off; i < off+length && i < int64(len(b)); i++ {
				b[i] = 0
			}
		}}
}

func opFallocate(name string, off, length int64, keep bool) dataOp {
	return dataOp{fmt.Sprintf("Fallocate %s [%d,+%d) keepSize %v", name, off, length, keep),
		func(f *btrfs.FS) error { return f.Fallocate(name, off, length, keep) },
		func(m map[string][]byte) {
			if !keep {
				m[name] = grow(m[name], off+length)
			}
		}}
}

func opClone(src string, srcOff int64, dst string, dstOff, length int64) dataOp {
	return dataOp{fmt.Sprintf("Clone %s [%d,+%d) -> %s at %d", src, srcOff, length, dst, dstOff),
		func(f *btrfs.FS) error { return f.Clone(src, srcOff, dst, dstOff, length) },
		func(m map[string][]byte) {
			piece := slices.Clone(m[src][srcOff : srcOff+length])
			b := grow(m[dst], dstOff+length)
			copy(b[dstOff:], piece)
			m[dst] = b
		}}
}

func opRemove(name string) dataOp {
	return dataOp{fmt.Sprintf("Remove %s", name),
		func(f *btrfs.FS) error { return f.Remove(name) },
		func(m map[string][]byte) { delete(m, name) }}
}

// runWithLoss writes base to work, runs pre and Commit, then ops and
// Commit with the power cut at lp (counted from the end of the first
// Commit; never when lp.n == 0), and returns what the disk holds
// afterwards: at a loss, the state at the last sync plus a random subset
// of the writes since (torn into 4 KiB pieces when torn).
func runWithLoss(t *testing.T, base *crashImage, work string, opts *btrfs.Options, pre, ops []dataOp,
	lp lossPoint, torn bool, rng *rand.Rand) *lossRun {
	t.Helper()
	base.save(t, work)
	mem := base.mem(t)
	run := &lossRun{}
	fsys, err := btrfs.OpenWritableWith(work, opts, blockdev.ScanOptions{Open: lossOpener(run, mem, lp, torn, rng)})
	if err != nil {
		t.Fatalf("open for writing: %v", err)
	}
	for _, o := range pre {
		if err := o.do(fsys); err != nil {
			t.Fatalf("first transaction: %s: %v", o.desc, err)
		}
	}
	if err := fsys.Commit(); err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	run.mu.Lock()
	run.armed = true
	run.mu.Unlock()
	for _, o := range ops {
		if err := o.do(fsys); err != nil {
			run.err = fmt.Errorf("%s: %w", o.desc, err)
			break
		}
	}
	if run.err == nil {
		run.err = fsys.Commit()
	}
	fsys.Close()
	if run.disk == nil {
		run.disk = mem.CrashClone(rng) // everything was synced
	}
	return run
}

// lossOpener opens each device of a session through a device that
// writes to the image file and to mem (teeDevice), counts in run the
// writes and syncs made while run.armed, and from lp on (never when
// lp.n == 0) fails them with errPowerLost, setting run.disk to what mem
// could hold after the loss (the state at the last sync plus a random
// subset of the writes since, torn into 4 KiB pieces when torn).
func lossOpener(run *lossRun, mem *blockdev.Mem, lp lossPoint, torn bool, rng *rand.Rand) func(string, bool) (blockdev.Device, error) {
	return func(path string, readOnly bool) (blockdev.Device, error) {
		f, err := blockdev.OpenFile(path, readOnly)
		if err != nil {
			return nil, err
		}
		faulty := blockdev.NewFaulty(&teeDevice{file: f, mem: mem})
		faulty.SetHook(func(op blockdev.FaultOp) error {
			run.mu.Lock()
			defer run.mu.Unlock()
			if op.Op == blockdev.OpRead || !run.armed {
				return nil
			}
			run.count[op.Op]++
			op.N = run.count[op.Op]
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
		return faulty, nil
	}
}

// crashState checks a disk after a loss: saved to a file, it opens
// read-only and for writing, its top directory holds exactly the files
// of before or of after, and btrfs check --check-data-csum is clean. It
// returns "before" or "after".
func crashState(t *testing.T, run *lossRun, path string, before, after map[string][]byte, what string) string {
	t.Helper()
	return crashStateOf(t, run, path, before, after, what, topFiles)
}

// crashStateOf is crashState with the files read by files.
func crashStateOf(t *testing.T, run *lossRun, path string, before, after map[string][]byte, what string, files func(*btrfs.FS) (map[string][]byte, error)) string {
	t.Helper()
	crashImageOf(t, run.disk, run.disk.Size()).save(t, path)
	fsys, err := btrfs.Open(path, nil)
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	got, err := files(fsys)
	fsys.Close()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	state := ""
	switch {
	case sameFileSet(got, after):
		state = "after"
	case sameFileSet(got, before):
		state = "before"
	default:
		t.Fatalf("%s: files are neither the state before nor after the transaction:\nvs before: %s\nvs after: %s",
			what, fileSetDiff(got, before), fileSetDiff(got, after))
	}
	w, err := btrfs.OpenWritable(path, nil)
	if err != nil {
		t.Fatalf("%s: open for writing: %v", what, err)
	}
	w.Close()
	btrfstest.Check(t, []string{path}, true)
	return state
}

// topFiles reads every regular file of the top directory.
func topFiles(fsys *btrfs.FS) (map[string][]byte, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read top directory: %w", err)
	}
	got := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s: type %v, want a regular file", e.Name(), e.Type())
		}
		b, err := fsys.ReadFile(e.Name())
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", e.Name(), err)
		}
		got[e.Name()] = b
	}
	return got, nil
}

func sameFileSet(a, b map[string][]byte) bool { return maps.EqualFunc(a, b, bytes.Equal) }

// fileSetDiff describes how got differs from want.
func fileSetDiff(got, want map[string][]byte) string {
	var out []string
	for _, k := range sortedNames(want) {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, k+" missing")
		case len(g) != len(want[k]):
			out = append(out, fmt.Sprintf("%s: %d bytes, want %d", k, len(g), len(want[k])))
		case !bytes.Equal(g, want[k]):
			i := 0
			for g[i] == want[k][i] {
				i++
			}
			out = append(out, fmt.Sprintf("%s: differs from byte %d", k, i))
		}
	}
	for _, k := range sortedNames(got) {
		if _, ok := want[k]; !ok {
			out = append(out, k+" unexpected")
		}
	}
	return strings.Join(out, "; ")
}

// maxDataLosses bounds the loss points tried without GOBTRFS_LONG.
const maxDataLosses = 24

// dataLossPoints lists the losses to try for a run that made ops: every
// sync and superblock write, the first and last write, the writes next to
// a sync, and a random sample of the others (all of them when all).
func dataLossPoints(ops []blockdev.FaultOp, rng *rand.Rand, all bool) []lossPoint {
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
		if op.Op == blockdev.OpSync || supers[op.Off] || op.N == 1 || nearSync {
			pts = append(pts, lp)
		} else {
			others = append(others, lp)
		}
	}
	if last := (lossPoint{op: blockdev.OpWrite, n: writes}); writes > 0 && !slices.Contains(pts, last) {
		pts = append(pts, last)
		others = slices.DeleteFunc(others, func(p lossPoint) bool { return p == last })
	}
	if all {
		return append(pts, others...)
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	return append(pts, others[:min(len(others), max(0, maxDataLosses-len(pts)))]...)
}
