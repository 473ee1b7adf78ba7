package btrfs_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// Power loss during concurrent changes and Syncs (issue 10).
//
// Goroutines change the FS at once, so the order of the device's writes
// differs from run to run and a loss point cannot be replayed by running
// the changes again (as TestCrashDuringDataOps does). Instead one run
// records every write (with its bytes) and every sync of the device, and
// a crash at loss point i is built offline: the original image, the
// recorded writes before i applied, the syncs before i made durable, and
// a random subset of the writes since the last of them kept (whole or
// torn). That is exactly what a power loss just before write or sync i
// could leave: the writes before i are the same whether the power went
// at i or not.
//
// What each crash image may hold is decided by three records of the run:
//
//   - models[g][k]: goroutine g's directory after its first k changes (its
//     changes are generated from the seed before the run, so the models
//     are known up front).
//   - commits[gen]: for every commit, bounds on each goroutine's change
//     count in it. A commit holds the FS lock exclusively while it
//     prepares (settles and seals its tree blocks, stage 2 of
//     docs/design/0009; the block writes, syncs and superblocks come
//     after, outside the lock), and every change runs under that lock. A
//     goroutine stores begun[g] = k before it calls change k and done[g]
//     = k after the call returns. The FS calls the recorder in commit
//     gen's critical section, after Prepare (SetPreparedHook): change
//     done[g] finished before the commit began (it returned before this
//     moment and cannot have run during the commit) and change begun[g]+1
//     has not begun: the commit holds models[g][k] for one k with done[g]
//     <= k <= begun[g] (read in that order). Between the two lies at most
//     the change in flight, which may have run before the commit or will
//     run after it. Bounds that cross mean a change ran during a commit's
//     critical section, and fail the test.
//   - promised[g] at write or sync i: the change count of goroutine g
//     when it called its last Sync that returned nil before write or
//     sync i was issued. Those changes must survive a loss at i.
//
// The rule for a crash image at i: it opens read-only and for writing
// and passes btrfs check --check-data-csum; its superblock generation is
// the original one or a commit of the run; and for that commit, every
// goroutine g's directory equals models[g][k] for one k that the commit
// may hold (above) with k >= promised[g] at i. As one commit holds one
// k per goroutine, the goroutines' directories come from the same
// commit, not each from its own; and as models are whole states, every
// file's content is one whole version (contents name their path and
// version), a renamed entry is in one place, never two, a removed one
// gone with all it had.
func TestCrashDuringConcurrentSyncs(t *testing.T) {
	btrfstest.RequireProgs(t)
	seed := testSeed(t)
	for ci, cfg := range liveCrashConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			testLiveCrash(t, cfg, rand.New(rand.NewPCG(seed, uint64(ci))))
		})
	}
}

// liveCrashConfig is one set of options the test runs with.
type liveCrashConfig struct {
	name string
	opts btrfs.Options
	// inPlace makes most changes rewrites through open Files, which run
	// beside each other (runParallel).
	inPlace bool
}

var liveCrashConfigs = []liveCrashConfig{
	// Commits only in Sync (and Close).
	{"syncs", btrfs.Options{CommitInterval: -1, DirtyLimit: -1}, false},
	// A small dirty limit: changes commit too, while others wait.
	{"dirty-limit", btrfs.Options{CommitInterval: -1, DirtyLimit: 64 << 10}, false},
	// Background commits besides the Syncs.
	{"background", btrfs.Options{CommitInterval: 20 * time.Millisecond, DirtyLimit: -1}, false},
	// Mostly writes through open Files, which run in parallel.
	{"open-files", btrfs.Options{CommitInterval: -1, DirtyLimit: -1}, true},
}

const (
	liveCrashGoroutines = 4
	liveCrashChanges    = 40 // per goroutine
	// liveCrashLosses bounds the loss points tried per configuration
	// without GOBTRFS_LONG (the loss after everything comes on top).
	liveCrashLosses = 22
)

// liveEntry is one entry of a goroutine's directory in the model.
type liveEntry struct {
	dir   bool
	src   string // a file: the path its content was written at
	ver   int    // and the version
	size  int
	xattr string // the value of user.crash; "" none
}

// liveModel is a goroutine's directory: path (from the top) -> entry.
type liveModel map[string]liveEntry

// liveCrashContent is what version ver of the file written at src holds:
// its path and version, repeated to size bytes, so a torn or mixed file
// tells itself apart from a whole version.
func liveCrashContent(src string, ver, size int) []byte {
	line := fmt.Sprintf("%s v%d\n", src, ver)
	return bytes.Repeat([]byte(line), size/len(line)+1)[:size]
}

// describeLiveContent says which whole version b is, or that it is none.
func describeLiveContent(b []byte) string {
	if len(b) == 0 {
		return "empty"
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		i = len(b)
	}
	var src string
	var ver int
	if f := strings.Fields(string(b[:i])); len(f) == 2 {
		src = f[0]
		fmt.Sscanf(f[1], "v%d", &ver)
	}
	if ver > 0 && bytes.Equal(b, liveCrashContent(src, ver, len(b))) {
		return fmt.Sprintf("%d bytes, whole version %d of %s", len(b), ver, src)
	}
	return fmt.Sprintf("%d bytes, no whole version (starts %q): torn or mixed", len(b), b[:min(i, 40)])
}

// liveChange is one change of a goroutine, and whether it Syncs after.
type liveChange struct {
	desc string
	do   func(*btrfs.FS) error
	sync bool
}

// liveSizes are the file sizes: inline, one block, several, large.
var liveSizes = []int{0, 300, 2500, 4096, 9000, 40000, 130000}

// genLiveChanges draws n changes of a goroutine's directory, starting
// from m, and returns them with the models after each: models[k] is the
// directory after the first k changes (models[0] is m).
func genLiveChanges(rng *rand.Rand, m liveModel, n int, inPlace bool) ([]liveChange, []liveModel) {
	models := []liveModel{m}
	var chs []liveChange
	next := 0 // names and versions
	for len(chs) < n {
		m = maps.Clone(models[len(models)-1])
		next++
		var files, dirs []string // dirs: every directory, top included
		for _, p := range slices.Sorted(maps.Keys(m)) {
			if m[p].dir {
				dirs = append(dirs, p)
			} else {
				files = append(files, p)
			}
		}
		var ch liveChange
		k := rng.IntN(10)
		mostlyInPlace := inPlace && len(files) > 0 && rng.IntN(5) > 0
		if mostlyInPlace {
			k = 0
		}
		switch {
		case k < 3 || len(files) == 0: // write a new file or rewrite one
			p := path.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("f%d", next))
			e := liveEntry{}
			inPlace := false
			if len(files) > 0 && (mostlyInPlace || rng.IntN(3) == 0) {
				p = files[rng.IntN(len(files))]
				e = m[p] // a rewrite keeps the inode and its xattr
				// Half the rewrites (most, with inPlace) go through an
				// open File, in one write of the same size: writes by
				// inode, which run beside other goroutines'
				// (runParallel).
				// An empty file's rewrite writes nothing, so it would
				// be no change at all for a Sync to wait for.
				inPlace = e.src == p && e.size > 0 && (mostlyInPlace || rng.IntN(2) == 0)
			}
			e.src, e.ver = p, next
			if !inPlace {
				e.size = liveSizes[rng.IntN(len(liveSizes))]
			}
			data := liveCrashContent(e.src, e.ver, e.size)
			m[p] = e
			if inPlace {
				ch = liveChange{fmt.Sprintf("File.WriteAt %s v%d %d bytes", p, e.ver, e.size), func(f *btrfs.FS) error {
					of, err := f.OpenFile(p)
					if err != nil {
						return err
					}
					if _, err := of.WriteAt(data, 0); err != nil {
						of.Close()
						return err
					}
					return of.Close()
				}, false}
			} else {
				ch = liveChange{fmt.Sprintf("WriteFile %s v%d %d bytes", p, e.ver, e.size),
					func(f *btrfs.FS) error { return f.WriteFile(p, data, 0o644) }, false}
			}
		case k == 3: // mkdir, at most two levels below the top
			parent := dirs[rng.IntN(len(dirs))]
			if strings.Count(parent, "/") >= 2 {
				continue
			}
			p := path.Join(parent, fmt.Sprintf("d%d", next))
			m[p] = liveEntry{dir: true}
			ch = liveChange{"Mkdir " + p, func(f *btrfs.FS) error { return f.Mkdir(p, 0o755) }, false}
		case k == 4: // remove a file or an empty directory
			var cands []string
			cands = append(cands, files...)
			for _, d := range dirs[1:] {
				if !hasChildren(m, d) {
					cands = append(cands, d)
				}
			}
			p := cands[rng.IntN(len(cands))]
			delete(m, p)
			ch = liveChange{"Remove " + p, func(f *btrfs.FS) error { return f.Remove(p) }, false}
		case k == 5 || k == 6: // rename within a directory
			var from, to string
			if rng.IntN(4) > 0 || len(dirs) == 1 {
				from = files[rng.IntN(len(files))]
				to = path.Join(path.Dir(from), fmt.Sprintf("r%d", next))
				var sibs []string
				for _, p := range files {
					if p != from && path.Dir(p) == path.Dir(from) {
						sibs = append(sibs, p)
					}
				}
				if len(sibs) > 0 && rng.IntN(2) == 0 {
					to = sibs[rng.IntN(len(sibs))] // replace a file
				}
			} else {
				from = dirs[1+rng.IntN(len(dirs)-1)] // a directory and all below
				to = path.Join(path.Dir(from), fmt.Sprintf("r%d", next))
			}
			for _, p := range slices.Collect(maps.Keys(m)) {
				if p == from || strings.HasPrefix(p, from+"/") {
					m[to+strings.TrimPrefix(p, from)] = m[p]
					if p != to {
						delete(m, p)
					}
				}
			}
			ch = liveChange{fmt.Sprintf("Rename %s %s", from, to), func(f *btrfs.FS) error { return f.Rename(from, to) }, false}
		default: // set user.crash on any entry, the top directory too
			all := append(slices.Clone(dirs), files...)
			p := all[rng.IntN(len(all))]
			e := m[p]
			e.xattr = fmt.Sprintf("%s x%d", p, next)
			m[p] = e
			val := []byte(e.xattr)
			ch = liveChange{fmt.Sprintf("Setxattr %s %q", p, val), func(f *btrfs.FS) error { return f.Setxattr(p, "user.crash", val) }, false}
		}
		ch.sync = rng.IntN(4) == 0
		chs = append(chs, ch)
		models = append(models, m)
	}
	return chs, models
}

func hasChildren(m liveModel, dir string) bool {
	for p := range m {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// liveRecord is one write or sync the device saw.
type liveRecord struct {
	sync     bool
	off      int64
	data     []byte
	promised []int // per goroutine, when it was issued (see the top)
}

// liveCommit is what a commit holds of each goroutine: models[g][k] for
// done[g] <= k <= begun[g] (begun[g] is done[g] or done[g]+1).
type liveCommit struct {
	done, begun []int
}

// liveRecorder is the device of the recorded run: an in-memory image
// whose writes and syncs are logged in the order the device carries them
// out. A write is logged with its bytes once made; a sync before it is
// made, so it covers only the writes that finished before it began.
type liveRecorder struct {
	mem *blockdev.Mem

	mu      sync.Mutex
	log     []liveRecord
	commits map[disk.Generation]liveCommit
	bad     error // the first snapshot that breaks the rule at the top
	// The goroutines' counters (see the top).
	begun, done, promised []atomic.Int64
}

func (d *liveRecorder) counters(c []atomic.Int64) []int {
	out := make([]int, len(c))
	for i := range c {
		out[i] = int(c[i].Load())
	}
	return out
}

func (d *liveRecorder) ReadAt(p []byte, off int64) (int, error) { return d.mem.ReadAt(p, off) }

func (d *liveRecorder) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := d.mem.WriteAt(p, off)
	if err != nil {
		return n, err
	}
	d.log = append(d.log, liveRecord{off: off, data: slices.Clone(p), promised: d.counters(d.promised)})
	return n, nil
}

// prepared records a commit's bounds (see the top); it runs in the
// commit's critical section.
func (d *liveRecorder) prepared(gen uint64) {
	// done first, then begun: see the top.
	c := liveCommit{done: d.counters(d.done)}
	c.begun = d.counters(d.begun)
	d.mu.Lock()
	defer d.mu.Unlock()
	for g := range c.done {
		if c.done[g] > c.begun[g] && d.bad == nil {
			d.bad = fmt.Errorf("goroutine %d: commit %d holds at least %d changes and at most %d: a change ran during the commit",
				g, gen, c.done[g], c.begun[g])
		}
	}
	d.commits[disk.Generation(gen)] = c
}

func (d *liveRecorder) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = append(d.log, liveRecord{sync: true, promised: d.counters(d.promised)})
	return d.mem.Sync()
}

func (d *liveRecorder) Size() int64  { return d.mem.Size() }
func (d *liveRecorder) Close() error { return nil }

// isSuperWrite reports whether a write of n bytes at off is a superblock
// copy.
func isSuperWrite(off int64, n int) bool {
	for i := 0; i < disk.SuperMirrorMax; i++ {
		if off == int64(disk.SuperblockOffsetOf(i)) && n == disk.SuperblockSize {
			return true
		}
	}
	return false
}

func testLiveCrash(t *testing.T, cfg liveCrashConfig, rng *rand.Rand) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20, NodeSize: 4096})

	// The goroutines' directories, a few files each, committed.
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]liveModel, liveCrashGoroutines)
	for g := range first {
		top := fmt.Sprintf("g%d", g)
		first[g] = liveModel{top: {dir: true}}
		if err := fsys.Mkdir(top, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			p := fmt.Sprintf("%s/base%d", top, i)
			e := liveEntry{src: p, ver: 1000 + i, size: liveSizes[(g+i)%len(liveSizes)]}
			if err := fsys.WriteFile(p, liveCrashContent(e.src, e.ver, e.size), 0o644); err != nil {
				t.Fatal(err)
			}
			first[g][p] = e
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	base := readImage(t, img)

	changes := make([][]liveChange, liveCrashGoroutines)
	models := make([][]liveModel, liveCrashGoroutines)
	for g := range changes {
		changes[g], models[g] = genLiveChanges(rand.New(rand.NewPCG(rng.Uint64(), uint64(g))), first[g], liveCrashChanges, cfg.inPlace)
	}

	start := time.Now()
	rec := runLiveRecorded(t, base, cfg, changes)
	t.Logf("recorded run: %v", time.Since(start).Round(time.Millisecond))
	syncs, supers := 0, 0
	for _, r := range rec.log {
		if r.sync {
			syncs++
		} else if isSuperWrite(r.off, len(r.data)) {
			supers++
		}
	}
	inFlight := 0 // commits that may or may not hold a change in flight
	for _, c := range rec.commits {
		if !slices.Equal(c.done, c.begun) {
			inFlight++
		}
	}
	pts := liveLossPoints(rec.log, rng, longTests())
	t.Logf("recorded %d writes and syncs (%d syncs, %d superblock writes, %d commits, %d of them with a change in flight); trying %d loss points",
		len(rec.log), syncs, supers, len(rec.commits)-1, inFlight, len(pts))

	check := filepath.Join(t.TempDir(), "crash.img")
	cur := base.mem(t)
	applied := 0
	trials := 1
	if longTests() {
		trials = 2
	}
	gens := map[disk.Generation]int{}
	for pi, i := range pts {
		for ; applied < i; applied++ {
			if r := rec.log[applied]; r.sync {
				if err := cur.Sync(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := cur.WriteAt(r.data, r.off); err != nil {
				t.Fatal(err)
			}
		}
		if i == len(rec.log) { // no loss: everything the run did
			promised := make([]int, liveCrashGoroutines)
			for g := range promised {
				promised[g] = len(changes[g])
			}
			gens[checkLiveCrash(t, cur.Clone(), check, rec, models, promised, "no loss")]++
			continue
		}
		for trial := range trials {
			torn := (pi+trial)%2 == 1
			var d *blockdev.Mem
			if torn {
				d = cur.CrashCloneTorn(rng, 4096)
			} else {
				d = cur.CrashClone(rng)
			}
			r := rec.log[i]
			what := fmt.Sprintf("loss before record %d (", i)
			if r.sync {
				what += "a sync"
			} else {
				what += fmt.Sprintf("a write of %d bytes at %d", len(r.data), r.off)
			}
			what += fmt.Sprintf(", torn %v, promised %v)", torn, r.promised)
			gens[checkLiveCrash(t, d, check, rec, models, r.promised, what)]++
		}
	}
	t.Logf("generations the crash images held (generation: images): %v", gens)
}

// runLiveRecorded runs the goroutines' changes, with their Syncs, on base
// through a liveRecorder and closes the FS.
func runLiveRecorded(t *testing.T, base *crashImage, cfg liveCrashConfig, changes [][]liveChange) *liveRecorder {
	n := len(changes)
	rec := &liveRecorder{mem: base.mem(t), commits: map[disk.Generation]liveCommit{},
		begun: make([]atomic.Int64, n), done: make([]atomic.Int64, n), promised: make([]atomic.Int64, n)}
	work := filepath.Join(t.TempDir(), "work.img")
	base.save(t, work)
	open := func(string, bool) (blockdev.Device, error) { return rec, nil }
	opts := cfg.opts
	fsys, err := btrfs.OpenWritableWith(work, &opts, blockdev.ScanOptions{Open: open})
	if err != nil {
		t.Fatalf("open for writing: %v", err)
	}
	rec.mu.Lock()
	sb0 := fsview.Of(fsys).Superblock()
	rec.commits[sb0.Generation] = liveCommit{done: make([]int, n), begun: make([]int, n)}
	rec.mu.Unlock()
	btrfs.SetPreparedHook(fsys, rec.prepared)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k, ch := range changes[g] {
				rec.begun[g].Store(int64(k + 1))
				if err := ch.do(fsys); err != nil {
					t.Errorf("goroutine %d, change %d: %s: %v", g, k+1, ch.desc, err)
					failed.Store(true)
					return
				}
				rec.done[g].Store(int64(k + 1))
				if ch.sync {
					if err := fsys.Sync(); err != nil {
						t.Errorf("goroutine %d: Sync after change %d: %v", g, k+1, err)
						failed.Store(true)
						return
					}
					rec.promised[g].Store(int64(k + 1))
				}
			}
		}()
	}
	wg.Wait()
	if wc, err := fsys.WriteCounters(); err == nil {
		t.Logf("%d changes, %d of them beside changes to other files", wc.Changes, wc.ParallelChanges)
	}
	if err := fsys.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if rec.bad != nil {
		t.Error(rec.bad)
		failed.Store(true)
	}
	if failed.Load() {
		for g := range changes {
			for k, ch := range changes[g] {
				t.Logf("goroutine %d change %d: %s (sync %v)", g, k+1, ch.desc, ch.sync)
			}
		}
		t.FailNow()
	}
	return rec
}

// liveLossPoints lists the records to cut the power before: every sync,
// every superblock write, the first and last write, the writes next to a
// sync, and the others (all of them when all; else a sample of both
// kinds, liveCrashLosses in all), and len(log), the state after
// everything. In order.
func liveLossPoints(log []liveRecord, rng *rand.Rand, all bool) []int {
	var key, others []int
	lastWrite := -1
	for i, r := range log {
		if !r.sync {
			lastWrite = i
		}
	}
	firstWrite := slices.IndexFunc(log, func(r liveRecord) bool { return !r.sync })
	for i, r := range log {
		nearSync := (i > 0 && log[i-1].sync) || (i+1 < len(log) && log[i+1].sync)
		switch {
		case i == firstWrite || i == lastWrite:
			// always
		case r.sync || isSuperWrite(r.off, len(r.data)) || nearSync:
			key = append(key, i)
			continue
		default:
			others = append(others, i)
			continue
		}
	}
	pts := []int{len(log)}
	if firstWrite >= 0 {
		pts = append(pts, firstWrite, lastWrite)
	}
	if all {
		pts = append(append(pts, key...), others...)
	} else {
		rng.Shuffle(len(key), func(i, j int) { key[i], key[j] = key[j], key[i] })
		rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
		nk := min(len(key), liveCrashLosses*2/3)
		pts = append(pts, key[:nk]...)
		pts = append(pts, others[:min(len(others), liveCrashLosses-nk)]...)
	}
	slices.Sort(pts)
	return slices.Compact(pts)
}

// liveGot is one entry as the crash image holds it.
type liveGot struct {
	dir    bool
	data   []byte
	xattrs []btrfs.Xattr
}

// checkLiveCrash checks the crash image d (see the top for the rule) and
// returns its generation.
func checkLiveCrash(t *testing.T, d *blockdev.Mem, path string, rec *liveRecorder,
	models [][]liveModel, promised []int, what string) disk.Generation {
	t.Helper()
	crashImageOf(t, d, d.Size()).save(t, path)
	fsys, err := btrfs.Open(path, nil)
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	gen := fsview.Of(fsys).Superblock().Generation
	c, ok := rec.commits[gen]
	if !ok {
		fsys.Close()
		t.Fatalf("%s: generation %d is no commit of the run", what, gen)
	}
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(ents) != len(models) {
		t.Errorf("%s: %d entries at the top, want %d", what, len(ents), len(models))
	}
	for g := range models {
		got, err := readLiveDir(fsys, fmt.Sprintf("g%d", g))
		if err != nil {
			t.Fatalf("%s: generation %d: %v", what, gen, err)
		}
		var ks []int
		for k := c.done[g]; k <= c.begun[g]; k++ {
			ks = append(ks, k)
		}
		match := -1
		for _, k := range ks {
			if k >= promised[g] && liveDiff(got, models[g][k]) == "" {
				match = k
			}
		}
		if match < 0 {
			var b strings.Builder
			fmt.Fprintf(&b, "%s: generation %d: goroutine %d's directory is none of the states the commit may hold with every returned Sync (changes %v, at least %d):", what, gen, g, ks, promised[g])
			for _, k := range ks {
				if d := liveDiff(got, models[g][k]); d != "" {
					fmt.Fprintf(&b, "\n  vs after change %d: %s", k, d)
				} else {
					fmt.Fprintf(&b, "\n  it is the state after change %d, older than a returned Sync", k)
				}
			}
			if k := slices.IndexFunc(models[g], func(m liveModel) bool { return liveDiff(got, m) == "" }); k >= 0 {
				fmt.Fprintf(&b, "\n  (it is the state after change %d)", k)
			}
			t.Error(b.String())
		}
	}
	fsys.Close()
	if t.Failed() {
		t.FailNow()
	}
	w, err := btrfs.OpenWritable(path, nil)
	if err != nil {
		t.Fatalf("%s: open for writing: %v", what, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("%s: close after opening for writing: %v", what, err)
	}
	btrfstest.Check(prefixTB{t, what + ": "}, []string{path}, true)
	return gen
}

// readLiveDir reads the tree at top: every entry's kind, data and xattrs.
func readLiveDir(fsys *btrfs.FS, top string) (map[string]liveGot, error) {
	got := map[string]liveGot{}
	err := fs.WalkDir(fsys, top, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var g liveGot
		switch {
		case e.IsDir():
			g.dir = true
		case e.Type().IsRegular():
			if g.data, err = fsys.ReadFile(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: type %v", p, e.Type())
		}
		if g.xattrs, err = fsys.Xattrs(p); err != nil {
			return err
		}
		got[p] = g
		return nil
	})
	return got, err
}

// liveDiff describes how got differs from the model m ("" when equal).
func liveDiff(got map[string]liveGot, m liveModel) string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(m)) {
		e := m[p]
		g, ok := got[p]
		switch {
		case !ok:
			out = append(out, p+" missing")
			continue
		case g.dir != e.dir:
			out = append(out, fmt.Sprintf("%s: directory %v, want %v", p, g.dir, e.dir))
			continue
		case !e.dir && !bytes.Equal(g.data, liveCrashContent(e.src, e.ver, e.size)):
			out = append(out, fmt.Sprintf("%s: %s, want version %d of %s (%d bytes)", p, describeLiveContent(g.data), e.ver, e.src, e.size))
		}
		var want []btrfs.Xattr
		if e.xattr != "" {
			want = []btrfs.Xattr{{Name: "user.crash", Value: []byte(e.xattr)}}
		}
		if !slices.EqualFunc(g.xattrs, want, func(a, b btrfs.Xattr) bool { return a.Name == b.Name && bytes.Equal(a.Value, b.Value) }) {
			out = append(out, fmt.Sprintf("%s: xattrs %s, want %q", p, fmtXattrs(g.xattrs), e.xattr))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := m[p]; !ok {
			what := "a directory"
			if !got[p].dir {
				what = describeLiveContent(got[p].data)
			}
			out = append(out, fmt.Sprintf("%s unexpected (%s)", p, what))
		}
	}
	return strings.Join(out, "; ")
}

func fmtXattrs(xs []btrfs.Xattr) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%s=%q", x.Name, x.Value))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// prefixTB puts a prefix before the failures of a helper that takes a
// testing.TB (btrfstest.Check), to say which loss point failed.
type prefixTB struct {
	testing.TB
	prefix string
}

func (p prefixTB) Fatal(args ...any) { p.TB.Helper(); p.TB.Fatal(append([]any{p.prefix}, args...)...) }
func (p prefixTB) Fatalf(format string, args ...any) {
	p.TB.Helper()
	p.TB.Fatalf(p.prefix+format, args...)
}
func (p prefixTB) Error(args ...any) { p.TB.Helper(); p.TB.Error(append([]any{p.prefix}, args...)...) }
func (p prefixTB) Errorf(format string, args ...any) {
	p.TB.Helper()
	p.TB.Errorf(p.prefix+format, args...)
}
