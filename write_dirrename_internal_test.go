package btrfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestParallelDirRenameBatch: renames of directories run in a parallel
// run (runParallel) beside other changes. A batch is built by holding the
// writer's lock while the changes queue: two moves that would make a loop
// if both ran (x/p into y/q/c, y/q into x/p/d; a hook holds each between
// its checks and its changes until the other is there), a rename of a directory in
// its parent, a move of a directory under itself (EINVAL), a creation in
// another directory, a creation in a directory only the run's move makes
// (after the run), and a chmod through the moved directory (before the
// move or after the run: ENOENT). Only the first move to another parent
// runs in the run; the second runs after it and finds x/p gone. Then
// the old path no longer resolves (the resolved-directories cache forgot
// it), btrfs check and the kernel agree.
func TestParallelDirRenameBatch(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for _, d := range []string{"x", "x/p", "x/p/d", "y", "y/q", "y/q/c", "s", "s/a", "u", "u/sub", "e"} {
		if err := fsys.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"x/p/f", "s/a/g", "g"} {
		if err := fsys.WriteFile(f, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	w := fsys.w
	before, _ := fsys.WriteCounters()
	w.mu.Lock()
	type result struct {
		name string
		err  error
	}
	res := make(chan result, 64)
	go func() { _, err := fsys.WriteAt("g", []byte("x"), 0); res <- result{"g", err} }()
	waitQueued(w, 0)
	time.Sleep(10 * time.Millisecond)
	queued := 0
	queue := func(name string, f func() error) {
		go func() { res <- result{name, f()} }()
		queued++
		waitQueued(w, queued)
	}
	want := map[string]error{}
	// Each move's checks pass before the other moves; both in the run
	// would make a loop (x/p/d/q/c/p). The hook holds each of them
	// between its checks and its changes until both are there, or a
	// while: only one may be there.
	arrived := make(chan struct{}, 2)
	w.renamePlanned = func(oldname, _ string) {
		if oldname != "x/p" && oldname != "y/q" {
			return
		}
		arrived <- struct{}{}
		deadline := time.After(300 * time.Millisecond)
		for len(arrived) < 2 {
			select {
			case <-deadline:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
	defer func() { w.renamePlanned = nil }()
	want["move x/p"] = nil
	queue("move x/p", func() error { return fsys.Rename("x/p", "y/q/c/p") })
	want["move y/q"] = syscall.ENOENT // x/p moved first
	queue("move y/q", func() error { return fsys.Rename("y/q", "x/p/d/q") })
	want["rename s/a"] = nil
	queue("rename s/a", func() error { return fsys.Rename("s/a", "s/a2") })
	want["move u under itself"] = syscall.EINVAL
	queue("move u under itself", func() error { return fsys.Rename("u", "u/sub/u") })
	want["create e/n"] = nil
	queue("create e/n", func() error { return fsys.CreateEmpty("e/n", 0o644) })
	want["create y/q/c/p/n"] = nil
	queue("create y/q/c/p/n", func() error { return fsys.CreateEmpty("y/q/c/p/n", 0o644) })
	queue("chmod x/p/f", func() error { return fsys.Chmod("x/p/f", 0o600) })
	w.mu.Unlock()
	var chmodErr error
	for range queued + 1 {
		r := <-res
		switch r.name {
		case "g":
			if r.err != nil {
				t.Fatal(r.err)
			}
			continue
		case "chmod x/p/f":
			// Before the move, or after the run, where x/p is gone.
			if r.err != nil && !errors.Is(r.err, syscall.ENOENT) {
				t.Errorf("%s: %v", r.name, r.err)
			}
			chmodErr = r.err
			continue
		}
		if !errors.Is(r.err, want[r.name]) || (want[r.name] == nil && r.err != nil) {
			t.Errorf("%s: %v, want %v", r.name, r.err, want[r.name])
		}
	}
	after, _ := fsys.WriteCounters()
	// move x/p and rename s/a ran in the run; move y/q did not (it
	// failed after the run, and would count if it ran in the run and
	// succeeded), nor did the move of u.
	if got := after.ParallelDirRenames - before.ParallelDirRenames; got != 2 {
		t.Errorf("%d renames of directories ran in parallel, want 2", got)
	}
	mode := fs.FileMode(0o644)
	if chmodErr == nil {
		mode = 0o600
	}
	for name, typ := range map[string]fs.FileMode{"y/q/c/p": fs.ModeDir, "y/q/c/p/f": mode, "y/q/c/p/n": 0o644,
		"s/a2/g": 0o644, "u/sub": fs.ModeDir, "e/n": 0o644} {
		fi, err := fsys.Stat(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := fi.Mode() & (fs.ModeDir | fs.ModePerm); got&fs.ModeDir != typ&fs.ModeDir || typ&fs.ModeDir == 0 && got != typ {
			t.Errorf("%s: mode %v, want %v", name, got, typ)
		}
	}
	for _, gone := range []string{"x/p", "s/a", "u/sub/u"} {
		if _, err := fsys.Stat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it gone", gone, err)
		}
	}
	// The writer resolved x/p before the run and cached it; the move
	// dropped it from the cache, so a later change finds it gone.
	for _, probe := range []string{"x/p/probe", "s/a/probe"} {
		if err := fsys.CreateEmpty(probe, 0o644); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("create %s after its directory moved: %v, want ENOENT", probe, err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	if !btrfstest.Interop() {
		return
	}
	mnt := btrfstest.Mount(t, "ro", img)
	for _, name := range []string{"y/q/c/p/f", "y/q/c/p/n", "s/a2/g", "e/n"} {
		if _, err := os.Lstat(filepath.Join(mnt, name)); err != nil {
			t.Errorf("kernel: %v", err)
		}
	}
}

// dirWorld is where the directories of TestParallelDirRenamesRandom are:
// two trees, whose roots move (top), and the directories d0, d1, ... in
// them, which move between the trees and change names.
type dirWorld struct {
	mu  sync.Mutex
	top [2]string // "A" or "A2"; "B" or "C/B"
	loc []dirLoc
}

// dirLoc is where directory dK is: its tree and whether it is called
// dK.r instead of dK.
type dirLoc struct {
	tree    int
	renamed bool
}

func (wd *dirWorld) nameOf(k int) string {
	if wd.loc[k].renamed {
		return fmt.Sprintf("d%d.r", k)
	}
	return fmt.Sprintf("d%d", k)
}

// path is where directory dK is, and its sub directory when sub is set.
func (wd *dirWorld) path(k int, sub bool) string {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	p := wd.top[wd.loc[k].tree] + "/" + wd.nameOf(k)
	if sub {
		p += "/sub"
	}
	return p
}

// swapWorld is where P and Q of TestParallelDirRenamesRandom are: P at
// X/P or in Q's sub directory, Q at Y/Q or in P's; never both inside the
// other (a loop, which no path reaches: the model's comparison fails).
type swapWorld struct {
	mu     sync.Mutex
	nested [2]bool
}

var swapHome = [2]string{"X/P", "Y/Q"}

// path is where P (i 0) or Q (1) is.
func (sw *swapWorld) path(i int) string {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.pathLocked(i)
}

func (sw *swapWorld) pathLocked(i int) string {
	if !sw.nested[i] {
		return swapHome[i]
	}
	return swapHome[1-i] + "/sub/" + swapHome[i][2:]
}

// dirContent is a file's data and mode, shared by its hard links.
type dirContent struct {
	data []byte
	mode fs.FileMode
}

// dirFile is a name a worker of TestParallelDirRenamesRandom made: in
// directory dK (or its sub directory); content is nil for a directory.
type dirFile struct {
	k       int
	sub     bool
	content *dirContent
}

// retryMoved runs op until it does not fail with ENOENT: each worker owns
// the names it works on and each mover its directories, so ENOENT means a
// path went through a directory that another goroutine moved meanwhile,
// and op, which changed nothing, tries again with paths made afresh.
func retryMoved(op func() error) error {
	for i := 0; ; i++ {
		err := op()
		if !errors.Is(err, syscall.ENOENT) || i == 10000 {
			return err
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// dirTestSeed is the seed of TestParallelDirRenamesRandom: GOBTRFS_SEED,
// or fresh. It fixes what each goroutine does, not how they interleave.
func dirTestSeed(t *testing.T) int64 {
	seed := time.Now().UnixNano()
	if s := os.Getenv("GOBTRFS_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("GOBTRFS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: GOBTRFS_SEED=%d go test -run '^%s$' .)", seed, seed, t.Name())
	return seed
}

// TestParallelDirRenamesRandom: renames of directories run beside the
// changes of files and directories under them (race detector). Movers move
// directories between two trees, rename them in place, move and rename the
// trees' roots, and try to move a directory under itself (EINVAL); after
// each move, a creation through the old path must fail (the cache of
// resolved directories forgot it). Workers meanwhile create, write, chmod,
// link, rename (between the moving directories too) and remove files, and
// make, rename and remove directories, under the moving ones; a path made
// stale by a move fails with ENOENT and is made afresh. Each worker owns
// its names and each mover its directories, so the final tree does not
// depend on the order the calls took. Two swappers move P into Q and Q
// into P and back: both moves may pass their checks at once, and only one
// of them may be made (else a loop). After each round (a commit), btrfs
// check (--check-data-csum) passes and our view and the kernel's equal
// the model; renames of directories must have run beside other changes
// (WriteCounters.ParallelDirRenames).
func TestParallelDirRenamesRandom(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 512 << 20})
	seed := dirTestSeed(t)
	const ndirs, workers, rounds = 6, 4, 3
	opsPerRound := 120
	if os.Getenv("GOBTRFS_LONG") == "1" {
		opsPerRound = 400
	}
	wd := &dirWorld{top: [2]string{"A", "B"}, loc: make([]dirLoc, ndirs)}
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"A", "B", "C", "X", "X/P", "X/P/sub", "Y", "Y/Q", "Y/Q/sub"} {
		if err := fsys.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for k := range ndirs {
		wd.loc[k].tree = k % 2
		for _, sub := range []bool{false, true} {
			if err := fsys.Mkdir(wd.path(k, sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	owned := make([]map[string]*dirFile, workers) // each worker's names
	for g := range owned {
		owned[g] = map[string]*dirFile{}
	}
	sw := &swapWorld{}
	var dirRenames, parallel int64
	for round := range rounds {
		// P's and Q's moves wait a little between their checks and their
		// changes, so that both are likely checked before either is made.
		fsys.w.renamePlanned = func(oldname, _ string) {
			if strings.HasSuffix(oldname, "/P") || strings.HasSuffix(oldname, "/Q") {
				time.Sleep(200 * time.Microsecond)
			}
		}
		var wg sync.WaitGroup
		fail := make(chan error, workers+4)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := dirSwapper(fsys, sw, i, opsPerRound/2); err != nil {
					fail <- fmt.Errorf("swapper %d: %w", i, err)
				}
			}()
		}
		for m := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(seed + int64(1000*round+100+m)))
				if err := dirMover(fsys, wd, rng, m, opsPerRound/2); err != nil {
					fail <- fmt.Errorf("mover %d: %w", m, err)
				}
			}()
		}
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(seed + int64(1000*round+g)))
				if err := dirWorker(fsys, wd, rng, g, round, owned[g], opsPerRound); err != nil {
					fail <- fmt.Errorf("worker %d: %w", g, err)
				}
			}()
		}
		wg.Wait()
		close(fail)
		for err := range fail {
			t.Fatal(err)
		}
		wc, _ := fsys.WriteCounters()
		dirRenames += wc.ParallelDirRenames
		parallel += wc.ParallelChanges
		want := dirModel(wd, sw, owned)
		compareDirModel(t, fmt.Sprintf("round %d, ours", round), want, fsys)
		if err := fsys.Close(); err != nil {
			t.Fatal(err)
		}
		btrfstest.Check(t, []string{img}, true)
		if btrfstest.Interop() {
			mnt := btrfstest.Mount(t, "ro", img)
			compareDirModel(t, fmt.Sprintf("round %d, kernel", round), want, os.DirFS(mnt).(fs.StatFS))
			btrfstest.Unmount(t, mnt)
		}
		if round == rounds-1 {
			break
		}
		if fsys, err = OpenWritable(img, &Options{CommitInterval: -1}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d changes in parallel, %d of them renames of directories", parallel, dirRenames)
	if dirRenames == 0 {
		t.Error("no rename of a directory ran beside other changes")
	}
	want := dirModel(wd, sw, owned)
	ro, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	compareDirModel(t, "read-only open", want, ro)
	ro.Close()
}

// dirSwapper is a swapper of TestParallelDirRenamesRandom: it moves P
// (i 0) or Q (1) into the other's sub directory and back home. Both
// moves into the other may be checked before either is made, but only
// one runs in a run: the other fails (EINVAL) or finds its path gone
// (ENOENT, then made afresh).
func dirSwapper(fsys *FS, sw *swapWorld, i, ops int) error {
	for range ops {
		var into bool
		err := retryMoved(func() error {
			sw.mu.Lock()
			old := sw.pathLocked(i)
			into = !sw.nested[i]
			new := swapHome[i]
			if into {
				// Into the other's sub directory, wherever it is.
				new = sw.pathLocked(1-i) + "/sub/" + swapHome[i][2:]
			}
			sw.mu.Unlock()
			return fsys.Rename(old, new)
		})
		switch {
		case into && errors.Is(err, syscall.EINVAL):
			// The other is inside this one.
		case err != nil:
			return err
		default:
			// Only this swapper moves this directory, so its state is
			// true once every swapper is done. (It cannot be checked
			// against the other's here: that lags what the other did.)
			sw.mu.Lock()
			sw.nested[i] = into
			sw.mu.Unlock()
		}
	}
	return nil
}

// dirMover is a mover of TestParallelDirRenamesRandom: it owns the root
// of tree m and the directories dK with K%2 == m.
func dirMover(fsys *FS, wd *dirWorld, rng *rand.Rand, m, ops int) error {
	mine := []int{}
	for k := range wd.loc {
		if k%2 == m {
			mine = append(mine, k)
		}
	}
	probe := func(old string) error {
		if err := fsys.CreateEmpty(old+"/probe", 0o644); !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("create %s/probe after it moved: %v, want ENOENT", old, err)
		}
		return nil
	}
	for range ops {
		k := mine[rng.Intn(len(mine))]
		switch rng.Intn(8) {
		case 0: // the tree's root: renamed in place (A), or moved (B)
			var old, new string
			err := retryMoved(func() error {
				wd.mu.Lock()
				old = wd.top[m]
				wd.mu.Unlock()
				new = map[string]string{"A": "A2", "A2": "A", "B": "C/B", "C/B": "B"}[old]
				return fsys.Rename(old, new)
			})
			if err != nil {
				return err
			}
			wd.mu.Lock()
			wd.top[m] = new
			wd.mu.Unlock()
			if err := probe(old); err != nil {
				return err
			}
		case 1, 2, 3: // dK to the other tree
			var old string
			err := retryMoved(func() error {
				old = wd.path(k, false)
				wd.mu.Lock()
				new := wd.top[1-wd.loc[k].tree] + "/" + wd.nameOf(k)
				wd.mu.Unlock()
				return fsys.Rename(old, new)
			})
			if err != nil {
				return err
			}
			wd.mu.Lock()
			wd.loc[k].tree = 1 - wd.loc[k].tree
			wd.mu.Unlock()
			if err := probe(old); err != nil {
				return err
			}
		case 4, 5: // dK renamed in place
			var old string
			err := retryMoved(func() error {
				old = wd.path(k, false)
				new := old[:strings.LastIndexByte(old, '/')+1] + fmt.Sprintf("d%d", k)
				if !strings.HasSuffix(old, ".r") {
					new += ".r"
				}
				return fsys.Rename(old, new)
			})
			if err != nil {
				return err
			}
			wd.mu.Lock()
			wd.loc[k].renamed = !wd.loc[k].renamed
			wd.mu.Unlock()
			if err := probe(old); err != nil {
				return err
			}
		case 6: // dK under itself
			err := retryMoved(func() error {
				return fsys.Rename(wd.path(k, false), wd.path(k, true)+"/x")
			})
			if !errors.Is(err, syscall.EINVAL) {
				return fmt.Errorf("move d%d under itself: %v, want EINVAL", k, err)
			}
		case 7: // the tree's root under one of its directories
			err := retryMoved(func() error {
				wd.mu.Lock()
				top := wd.top[m]
				wd.mu.Unlock()
				for _, j := range mine {
					if wd.loc[j].tree == m {
						return fsys.Rename(top, wd.path(j, true)+"/t")
					}
				}
				return fsys.Rename(top, top+"/t")
			})
			if !errors.Is(err, syscall.EINVAL) {
				return fmt.Errorf("move tree %d under itself: %v, want EINVAL", m, err)
			}
		}
	}
	return nil
}

// dirWorker is a worker of TestParallelDirRenamesRandom: it makes, changes
// and removes the names in mine, under the movers' directories.
func dirWorker(fsys *FS, wd *dirWorld, rng *rand.Rand, g, round int, mine map[string]*dirFile, ops int) error {
	fresh := 0
	newName := func(dir bool) string {
		fresh++
		if dir {
			return fmt.Sprintf("w%d-%d-%dd", g, round, fresh)
		}
		return fmt.Sprintf("w%d-%d-%d", g, round, fresh)
	}
	pathOf := func(name string) string { f := mine[name]; return wd.path(f.k, f.sub) + "/" + name }
	pick := func(dirs bool) string {
		var names []string
		for n, f := range mine {
			if (f.content == nil) == dirs {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return ""
		}
		slices.Sort(names)
		return names[rng.Intn(len(names))]
	}
	for range ops {
		k, sub := rng.Intn(len(wd.loc)), rng.Intn(2) == 0
		file, dir := pick(false), pick(true)
		switch r := rng.Intn(10); {
		case r <= 1 || file == "": // a new file
			name := newName(false)
			if err := retryMoved(func() error { return fsys.CreateEmpty(wd.path(k, sub)+"/"+name, 0o644) }); err != nil {
				return err
			}
			mine[name] = &dirFile{k: k, sub: sub, content: &dirContent{mode: 0o644}}
		case r == 2: // data
			c := mine[file].content
			p := make([]byte, 1+rng.Intn(9000))
			rng.Read(p)
			off := rng.Intn(len(c.data) + 1)
			if err := retryMoved(func() error { _, err := fsys.WriteAt(pathOf(file), p, int64(off)); return err }); err != nil {
				return err
			}
			if end := off + len(p); end > len(c.data) {
				c.data = append(c.data, make([]byte, end-len(c.data))...)
			}
			copy(c.data[off:], p)
		case r == 3: // a mode
			mode := []fs.FileMode{0o600, 0o640, 0o644}[rng.Intn(3)]
			if err := retryMoved(func() error { return fsys.Chmod(pathOf(file), mode) }); err != nil {
				return err
			}
			mine[file].content.mode = mode
		case r == 4: // a rename, maybe to another moving directory
			name := newName(false)
			if err := retryMoved(func() error { return fsys.Rename(pathOf(file), wd.path(k, sub)+"/"+name) }); err != nil {
				return err
			}
			mine[name] = &dirFile{k: k, sub: sub, content: mine[file].content}
			delete(mine, file)
		case r == 5: // a hard link
			name := newName(false)
			if err := retryMoved(func() error { return fsys.Link(pathOf(file), wd.path(k, sub)+"/"+name) }); err != nil {
				return err
			}
			mine[name] = &dirFile{k: k, sub: sub, content: mine[file].content}
		case r == 6: // a removal
			if err := retryMoved(func() error { return fsys.Remove(pathOf(file)) }); err != nil {
				return err
			}
			delete(mine, file)
		case r == 7: // a directory
			name := newName(true)
			if err := retryMoved(func() error { return fsys.Mkdir(wd.path(k, sub)+"/"+name, 0o755) }); err != nil {
				return err
			}
			mine[name] = &dirFile{k: k, sub: sub}
		case r == 8 && dir != "": // an empty directory's removal
			if err := retryMoved(func() error { return fsys.Remove(pathOf(dir)) }); err != nil {
				return err
			}
			delete(mine, dir)
		default: // a directory renamed, maybe to another moving directory
			if dir == "" {
				continue
			}
			name := newName(true)
			if err := retryMoved(func() error { return fsys.Rename(pathOf(dir), wd.path(k, sub)+"/"+name) }); err != nil {
				return err
			}
			mine[name] = &dirFile{k: k, sub: sub}
			delete(mine, dir)
		}
	}
	return nil
}

// dirModel is the tree TestParallelDirRenamesRandom expects: path to the
// content of a file, nil for a directory.
func dirModel(wd *dirWorld, sw *swapWorld, owned []map[string]*dirFile) map[string]*dirContent {
	want := map[string]*dirContent{"C": nil, wd.top[0]: nil, wd.top[1]: nil, "X": nil, "Y": nil}
	for i := range 2 {
		want[sw.path(i)], want[sw.path(i)+"/sub"] = nil, nil
	}
	for k := range wd.loc {
		want[wd.path(k, false)], want[wd.path(k, true)] = nil, nil
	}
	for _, mine := range owned {
		for name, f := range mine {
			want[wd.path(f.k, f.sub)+"/"+name] = f.content
		}
	}
	return want
}

// compareDirModel compares fsys with want: every name, kind, mode and
// file's data, and nothing more.
func compareDirModel(t *testing.T, who string, want map[string]*dirContent, fsys fs.StatFS) {
	t.Helper()
	seen := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		c, ok := want[p]
		switch {
		case !ok:
			t.Errorf("%s: %s is not in the model", who, p)
			return nil
		case c == nil:
			if !d.IsDir() {
				t.Errorf("%s: %s is not a directory", who, p)
			}
		default:
			fi, err := d.Info()
			if err != nil {
				return err
			}
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			if fi.Mode() != c.mode || !bytes.Equal(b, c.data) {
				t.Errorf("%s: %s: mode %v, %d bytes; want %v, %d bytes", who, p, fi.Mode(), len(b), c.mode, len(c.data))
			}
		}
		seen++
		return nil
	})
	if err != nil {
		t.Errorf("%s: %v", who, err)
	}
	if seen != len(want) {
		t.Errorf("%s: %d names, want %d", who, seen, len(want))
	}
}

// TestWalkInRunPinned: inside a parallel run a change walks only the
// paths it resolved before the run, and only while they lead where they
// did then; any other walk says errRunAlone (the change then runs after
// the run). A change without paths (noPins) walks none.
func TestWalkInRunPinned(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for _, d := range []string{"a", "a/b", "c"} {
		if err := fsys.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := fsys.w
	walk := func(pins map[string]wdir, record bool, path string) (uint64, error) {
		t.Helper()
		w.mu.Lock()
		defer w.mu.Unlock()
		c, err := fsys.beginChange(w)
		if err != nil {
			t.Fatal(err)
		}
		c.pins, c.recordPins = pins, record
		ino, err := c.walkDirs(splitPath(path))
		return uint64(ino), err
	}
	pins := map[string]wdir{}
	want, err := walk(pins, true, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if ino, err := walk(pins, false, "a/b"); err != nil || ino != want {
		t.Fatalf("a/b pinned: %d %v, want %d", ino, err, want)
	}
	if _, err := walk(pins, false, "a"); !errors.Is(err, errRunAlone) {
		t.Errorf("a, not pinned: %v, want errRunAlone", err)
	}
	if _, err := walk(noPins, false, "a/b"); !errors.Is(err, errRunAlone) {
		t.Errorf("a/b without pins: %v, want errRunAlone", err)
	}
	// Moved away, and a new a/b made: the pinned path leads elsewhere.
	if err := fsys.Rename("a/b", "c/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := walk(pins, false, "a/b"); !errors.Is(err, errRunAlone) {
		t.Errorf("a/b after its move: %v, want errRunAlone", err)
	}
	if err := fsys.Mkdir("a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := walk(pins, false, "a/b"); !errors.Is(err, errRunAlone) {
		t.Errorf("a/b made again: %v, want errRunAlone", err)
	}
	if ino, err := walk(nil, false, "c/b"); err != nil || ino != want {
		t.Errorf("c/b outside a run: %d %v, want %d", ino, err, want)
	}
}
