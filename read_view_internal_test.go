package btrfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// readsMustFinish runs each read in its own goroutine and fails the test
// unless all return within the time limit: reads must never wait for the
// writer's lock, which the caller holds (in a hook) meanwhile.
func readsMustFinish(t *testing.T, reads ...func() error) {
	t.Helper()
	errs := make(chan error, len(reads))
	for _, r := range reads {
		go func() { errs <- r() }()
	}
	deadline := time.After(10 * time.Second)
	for range reads {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
		case <-deadline:
			// Not Fatal: the caller goes on to let the held run or
			// commit finish, so the FS closes.
			t.Error("a read waited for the change run or commit holding the lock")
			return
		}
	}
}

// readsGoOn puts the writer in the state of reads going on beside runs of
// changes, as if one had just waited for a run, for the rest of the test:
// every run publishes its result, so reads never wait (readsOverlap).
func readsGoOn(w *writer) {
	w.mu.Lock()
	w.readWindow = time.Hour
	w.mu.Unlock()
	w.noteOverlap()
}

// wantFile is a read that checks name holds want.
func wantFile(fsys *FS, name string, want []byte) func() error {
	return func() error {
		b, err := fsys.ReadFile(name)
		if err != nil {
			return err
		}
		if !bytes.Equal(b, want) {
			return fmt.Errorf("%s: read %d bytes starting %q, want %d starting %q",
				name, len(b), b[:min(len(b), 8)], len(want), want[:min(len(want), 8)])
		}
		return nil
	}
}

// TestReadsDuringChangeRun: while reads go on beside runs of changes
// (readsGoOn) and a run holds the writer's lock (held in the middle by the
// midRun hook, after the changes ran and before the view is published),
// reads from other goroutines finish and see the
// state before the run: files, directory listings, open Files, stats. A
// change alone and a parallel run are both held. Afterwards the goroutine
// whose change returned reads it (read-your-writes).
func TestReadsDuringChangeRun(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	readsGoOn(fsys.w)
	v0 := bytes.Repeat([]byte("v0"), 10000)
	for _, name := range []string{"a", "b"} {
		if err := fsys.WriteFile(name, v0, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	open, err := fsys.OpenFile("a")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	w := fsys.w
	inRun, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w.mu.Lock()
	w.midRun = func() { once.Do(func() { close(inRun); <-release }) }
	w.mu.Unlock()

	// A change alone: a whole-file rewrite and a new name.
	v1 := bytes.Repeat([]byte("v1"), 12000)
	done := make(chan error, 1)
	go func() { done <- fsys.WriteFile("a", v1, 0o644) }()
	<-inRun
	readsMustFinish(t,
		wantFile(fsys, "a", v0),
		wantFile(fsys, "b", v0),
		func() error {
			p := make([]byte, len(v0)+10)
			n, err := open.ReadAt(p, 0)
			if n != len(v0) || !bytes.Equal(p[:n], v0) {
				return fmt.Errorf("open file: %d bytes starting %q (%v), want the old %d starting %q", n, p[:8], err, len(v0), v0[:8])
			}
			return nil
		},
		func() error {
			fi, err := fsys.Stat("a")
			if err != nil || fi.Size() != int64(len(v0)) {
				return fmt.Errorf("stat a: %v, size want %d", err, len(v0))
			}
			return nil
		},
		func() error {
			ents, err := fsys.ReadDir(".")
			if err != nil || len(ents) != 2 {
				return fmt.Errorf("readdir: %d entries (%v), want 2", len(ents), err)
			}
			return nil
		},
	)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	readsMustFinish(t, wantFile(fsys, "a", v1)) // read-your-writes

	// A parallel run: writes through open Files of two files, queued
	// while the lock is held so they make one run (after the batch of
	// the change that became the combiner, a write to c).
	if err := fsys.WriteFile("c", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	inRun, release = make(chan struct{}), make(chan struct{})
	fb, err := fsys.OpenFile("b")
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	w.mu.Lock()
	calls := 0
	w.midRun = func() {
		if calls++; calls == 2 {
			close(inRun)
			<-release
		}
	}
	errs := make(chan error, 3)
	go func() { _, err := fsys.WriteAt("c", []byte("x"), 0); errs <- err }()
	waitQueued(w, 0)
	time.Sleep(10 * time.Millisecond) // the combiner now waits for the lock
	go func() { _, err := open.WriteAt([]byte("AAAA"), 0); errs <- err }()
	waitQueued(w, 1)
	go func() { _, err := fb.WriteAt([]byte("BBBB"), 0); errs <- err }()
	waitQueued(w, 2)
	before, _ := fsys.WriteCounters()
	w.mu.Unlock()
	<-inRun
	readsMustFinish(t, wantFile(fsys, "a", v1), wantFile(fsys, "b", v0))
	close(release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := fsys.WriteCounters(); after.ParallelChanges-before.ParallelChanges != 2 {
		t.Errorf("%d changes ran in parallel, want 2", after.ParallelChanges-before.ParallelChanges)
	}
	a2 := append([]byte("AAAA"), v1[4:]...)
	b2 := append([]byte("BBBB"), v0[4:]...)
	readsMustFinish(t, wantFile(fsys, "a", a2), wantFile(fsys, "b", b2))
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	readsMustFinish(t, wantFile(ro, "a", a2), wantFile(ro, "b", b2))
}

// TestReadsDuringCommit: while a commit's critical section holds the lock
// (held by the prepared hook, after Prepare), reads finish and see every
// change made before it; an open File too.
func TestReadsDuringCommit(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	v1 := bytes.Repeat([]byte("committed?"), 3000)
	if err := fsys.WriteFile("a", v1, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	open, err := fsys.OpenFile("a")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	inCommit, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	SetPreparedHook(fsys, func(uint64) { once.Do(func() { close(inCommit); <-release }) })
	done := make(chan error, 1)
	go func() { done <- fsys.Commit() }()
	<-inCommit
	readsMustFinish(t,
		wantFile(fsys, "a", v1),
		func() error {
			p := make([]byte, len(v1))
			if n, err := open.ReadAt(p, 0); n != len(v1) || !bytes.Equal(p, v1) {
				return fmt.Errorf("open file: %d bytes (%v)", n, err)
			}
			return nil
		},
		func() error {
			fi, err := fsys.Stat("d")
			if err != nil || !fi.IsDir() {
				return fmt.Errorf("stat d: %v", err)
			}
			return nil
		},
	)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	readsMustFinish(t, wantFile(fsys, "a", v1))
}

// TestFirstReadDuringCommit: after a quiet spell (no read for longer than
// readWindow, so the runs before left no view), a read that arrives while
// a commit's critical section holds the lock reads the state the commit
// began with instead of waiting for it: the commit publishes one first.
func TestFirstReadDuringCommit(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	v1 := bytes.Repeat([]byte("quiet then"), 3000)
	if err := fsys.WriteFile("a", v1, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat("a"); err != nil { // a read: a view is published
		t.Fatal(err)
	}
	time.Sleep(readWindow + 50*time.Millisecond)
	if err := fsys.Mkdir("d", 0o755); err != nil { // ends a run with no read in the window
		t.Fatal(err)
	}
	if !fsys.w.stale.Load() {
		t.Fatal("the run after a quiet spell published a view; the test needs it stale")
	}
	inCommit, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	SetPreparedHook(fsys, func(uint64) { once.Do(func() { close(inCommit); <-release }) })
	done := make(chan error, 1)
	go func() { done <- fsys.Commit() }()
	<-inCommit
	readsMustFinish(t,
		wantFile(fsys, "a", v1),
		func() error {
			fi, err := fsys.Stat("d")
			if err != nil || !fi.IsDir() {
				return fmt.Errorf("stat d: %v", err)
			}
			return nil
		},
	)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	readsMustFinish(t, wantFile(fsys, "a", v1))
}

// TestViewOutlivesCommit: a read that took its view before a commit keeps
// reading that state after it, and the first change after the commit (which
// begins a transaction that may reuse what the commit freed) waits for it.
func TestViewOutlivesCommit(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	v1 := bytes.Repeat([]byte{1}, 64<<10)
	if err := fsys.WriteFile("a", v1, 0o644); err != nil {
		t.Fatal(err)
	}
	r, release := fsys.reader() // a read in progress
	v2 := bytes.Repeat([]byte{2}, 64<<10)
	if err := fsys.WriteFile("a", v2, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	var once sync.Once
	fsys.w.mu.Lock()
	fsys.w.drainHook = func() { once.Do(func() { close(waiting) }) }
	fsys.w.mu.Unlock()
	v3 := bytes.Repeat([]byte{3}, 64<<10)
	done := make(chan error, 1)
	go func() { done <- fsys.WriteFile("b", v3, 0o644) }()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the change after the commit did not wait for the older view (%v)", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the change after the commit neither waited nor finished")
	}
	// Reads of the fresh state still go on meanwhile.
	readsMustFinish(t, wantFile(fsys, "a", v2))
	if err := wantFile(r, "a", v1)(); err != nil {
		t.Error("the old view:", err)
	}
	if _, err := r.Stat("b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old view sees b: %v", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	readsMustFinish(t, wantFile(fsys, "b", v3))
}

// stampMark is in the high half of every stamp word: bytes that are no
// stamp (zeros where data was never written, tree blocks) are told apart
// from stamp 0.
const stampMark = 0x5354414d << 32

// stamped returns n bytes of 8-byte words of stamp k.
func stamped(k uint64, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], stampMark|k)
	}
	return b
}

// oneStamp returns the stamp of b, or an error when b holds more than one
// or words that are no stamp.
func oneStamp(b []byte) (uint64, error) {
	if len(b) < 8 {
		return 0, fmt.Errorf("%d bytes", len(b))
	}
	k := binary.LittleEndian.Uint64(b)
	if k&^(1<<32-1) != stampMark {
		return 0, fmt.Errorf("no stamp: % x", b[:8])
	}
	for i := 0; i+8 <= len(b); i += 8 {
		if got := binary.LittleEndian.Uint64(b[i:]); got != k {
			return 0, fmt.Errorf("words %#x and %#x at %d", k, got, i)
		}
	}
	return k &^ stampMark, nil
}

// consistentVariant is one form of TestReadsConsistentRandom.
type consistentVariant struct {
	name   string
	mkfs   btrfstest.MkfsOptions
	rounds int
	// nosum makes every file NODATASUM: no checksum tells a read it
	// met the wrong bytes.
	nosum bool
	// rollback: the writers also roll the running transaction back
	// (everyone's changes since the last commit), now and then.
	rollback bool
	// slowReads: reads of big go through an open File, and a quarter of
	// them wait up to 30 ms after they took their view (readHook); so do
	// a quarter of the reads of pairs.
	slowReads bool
}

// readOpen reads name whole through an open File.
func readOpen(fsys *FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err == io.EOF {
		err = nil
	}
	return b[:n], err
}

var consistentVariants = []consistentVariant{
	{name: "default", mkfs: btrfstest.MkfsOptions{Size: 512 << 20}, rounds: 40},
	// Mixed block groups: the commit's tree blocks go where data was
	// (docs/design/0009, "How long a view lives").
	{name: "mixed-nosum", mkfs: btrfstest.MkfsOptions{Size: 512 << 20, NodeSize: 4096, Extra: []string{"--mixed"}},
		rounds: 12, nosum: true, slowReads: true},
	// Rollbacks drop data still staged for writing behind while reads
	// of views of the dropped transaction go on.
	{name: "nosum-rollback", mkfs: btrfstest.MkfsOptions{Size: 512 << 20}, rounds: 12, nosum: true, rollback: true, slowReads: true},
}

// TestReadsConsistentRandom: writers change their own directories at random
// while readers, without the lock, check that every state they see is one
// that existed between whole changes: a file rewritten whole in one change
// (big, spanning many sectors, checksum items and extents) holds one stamp;
// a name renamed back and forth is listed exactly once; two files read in
// one view (an internal reader) hold stamps of one state of their
// writer's pair (the pair is written stamp by stamp, a before b, so in any
// state b's stamp is a's or one less); and no reader ever sees a stamp go
// back (but where rollbacks take them back). Commits land everywhere:
// Sync, background commits, a small dirty limit. Variants: mixed block
// groups, files without checksums, rollbacks. GOBTRFS_SEED replays the
// writers' and readers' choices (not the interleaving).
func TestReadsConsistentRandom(t *testing.T) {
	btrfstest.RequireProgs(t)
	for _, v := range consistentVariants {
		t.Run(v.name, func(t *testing.T) { testReadsConsistent(t, v) })
	}
}

func testReadsConsistent(t *testing.T, v consistentVariant) {
	img := btrfstest.Mkfs(t, v.mkfs)
	fsys, err := OpenWritable(img, &Options{CommitInterval: 20 * time.Millisecond, DirtyLimit: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	seed := time.Now().UnixNano()
	if s := os.Getenv("GOBTRFS_SEED"); s != "" {
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("GOBTRFS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay the choices: GOBTRFS_SEED=%d go test -run '^%s$' .)", seed, seed, t.Name())
	const writers, readers = 3, 4
	rounds := v.rounds
	if os.Getenv("GOBTRFS_LONG") == "1" {
		rounds *= 4
	}
	sizes := []int{300 << 10, 4096, 70 << 10}
	for g := range writers {
		d := fmt.Sprintf("d%d", g)
		if err := fsys.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"big", "a", "b"} {
			if err := fsys.WriteFile(d+"/"+name, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if v.nosum {
				if err := fsys.SetInodeFlags(d+"/"+name, uint64(disk.InodeNoDataSum), 0); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fsys.WriteAt(d+"/"+name, stamped(0, sizes[g%len(sizes)]), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := fsys.WriteFile(d+"/p0", nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Commit(); err != nil { // what rollbacks go back to, at the least
		t.Fatal(err)
	}
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		failOnce sync.Once
		failure  error
		finished atomic.Int32 // writers done
		rollback atomic.Int32
	)
	fail := func(err error) {
		failOnce.Do(func() { failure = err })
		stop.Store(true)
	}
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer finished.Add(1)
			rng := rand.New(rand.NewSource(seed + int64(g)))
			d := fmt.Sprintf("d%d", g)
			size := sizes[g%len(sizes)]
			p := 0
			for k := uint64(1); k <= uint64(rounds) && !stop.Load(); k++ {
				steps := []func() error{
					func() error { return fsys.WriteFile(d+"/big", stamped(k, 300<<10+rng.Intn(3)*4096), 0o644) },
					func() error {
						if !v.rollback || rng.Intn(8) != 0 {
							return nil
						}
						// Right after big was written: its data
						// is likely still staged, never written.
						time.Sleep(time.Duration(rng.Intn(10)) * time.Millisecond)
						rollback.Add(1)
						return fsys.Rollback()
					},
					func() error { _, err := fsys.WriteAt(d+"/a", stamped(k, size), 0); return err },
					func() error { _, err := fsys.WriteAt(d+"/b", stamped(k, size), 0); return err },
					func() error {
						err := fsys.Rename(fmt.Sprintf("%s/p%d", d, p), fmt.Sprintf("%s/p%d", d, 1-p))
						if v.rollback && errors.Is(err, fs.ErrNotExist) {
							// A rollback took the last rename back.
							p = 1 - p
							err = fsys.Rename(fmt.Sprintf("%s/p%d", d, p), fmt.Sprintf("%s/p%d", d, 1-p))
						}
						p = 1 - p
						return err
					},
				}
				for _, s := range steps {
					if err := s(); err != nil {
						fail(fmt.Errorf("writer %d round %d: %w", g, k, err))
						return
					}
				}
				if rng.Intn(8) == 0 {
					if err := fsys.Sync(); err != nil {
						fail(err)
						return
					}
				}
			}
		}()
	}
	if v.slowReads {
		// Some reads of open Files hold their view a while before they
		// read the data: changes and commits go on meanwhile.
		hook := func() {
			if rand.Intn(4) == 0 {
				time.Sleep(time.Duration(rand.Intn(30)) * time.Millisecond)
			}
		}
		fsys.w.readHook.Store(&hook)
	}
	var reads atomic.Int64
	for rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + 100 + int64(rd)))
			last := make([]uint64, writers) // the newest stamp of a seen per writer
			for !stop.Load() {
				g := rng.Intn(writers)
				d := fmt.Sprintf("d%d", g)
				switch rng.Intn(3) {
				case 0:
					var b []byte
					var err error
					if v.slowReads {
						b, err = readOpen(fsys, d+"/big")
					} else {
						b, err = fsys.ReadFile(d + "/big")
					}
					if err == nil {
						_, err = oneStamp(b)
					}
					if err != nil {
						fail(fmt.Errorf("reader %d: %s/big: %w", rd, d, err))
					}
				case 1:
					ents, err := fsys.ReadDir(d)
					n := 0
					for _, e := range ents {
						if e.Name() == "p0" || e.Name() == "p1" {
							n++
						}
					}
					if err != nil || n != 1 {
						fail(fmt.Errorf("reader %d: %s lists %d of p0, p1 (%v)", rd, d, n, err))
					}
				case 2:
					r, done := fsys.reader()
					if v.slowReads && rng.Intn(4) == 0 {
						time.Sleep(time.Duration(rng.Intn(30)) * time.Millisecond)
					}
					ba, erra := r.ReadFile(d + "/a")
					bb, errb := r.ReadFile(d + "/b")
					// A read bound to one view has no other to read
					// again in when a rollback drops its transaction.
					dropped := r.viewDropped()
					done()
					if dropped {
						break
					}
					if err := errors.Join(erra, errb); err != nil {
						fail(fmt.Errorf("reader %d: %s: %w", rd, d, err))
						break
					}
					ka, erra := oneStamp(ba)
					kb, errb := oneStamp(bb)
					switch {
					case erra != nil || errb != nil:
						fail(fmt.Errorf("reader %d: %s: a %v, b %v", rd, d, erra, errb))
					case v.rollback:
						// A rollback between a writer's a and b
						// leaves b to be written after an older a.
					case kb != ka && kb+1 != ka:
						fail(fmt.Errorf("reader %d: %s: a at %d and b at %d in one view", rd, d, ka, kb))
					case ka < last[g]:
						fail(fmt.Errorf("reader %d: %s: a went back from %d to %d", rd, d, last[g], ka))
					}
					last[g] = ka
				}
				reads.Add(1)
			}
		}()
	}
	go func() {
		// The readers stop when the writers are done.
		for {
			time.Sleep(5 * time.Millisecond)
			if stop.Load() {
				return
			}
			if finished.Load() == writers && (v.rollback || writersDone(fsys, writers, rounds)) {
				stop.Store(true)
				return
			}
		}
	}()
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	t.Logf("%d reads, %d rollbacks", reads.Load(), rollback.Load())
	if v.rollback {
		// Another writer's rollback may have taken a writer's last
		// round back: write it again.
		for g := range writers {
			for _, name := range []string{"a", "b"} {
				if _, err := fsys.WriteAt(fmt.Sprintf("d%d/%s", g, name), stamped(uint64(rounds), sizes[g%len(sizes)]), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !writersDone(ro, writers, rounds) {
		t.Error("the image does not hold the writers' last round")
	}
	btrfstest.Check(t, []string{img}, true)
}

// writersDone reports whether every writer of TestReadsConsistentRandom
// has written its last round (its a and b hold the last stamp).
func writersDone(fsys *FS, writers, rounds int) bool {
	for g := range writers {
		for _, name := range []string{"a", "b"} {
			b, err := fsys.ReadFile(fmt.Sprintf("d%d/%s", g, name))
			if err != nil {
				return false
			}
			if k, err := oneStamp(b); err != nil || k != uint64(rounds) {
				return false
			}
		}
	}
	return true
}

// TestQuietWritesCopyNothing: while no read comes beside them, runs of
// changes publish no view and the engine keeps no block for views; the
// first read then publishes and sees every change that returned
// (read-your-writes); while a read holds a view, runs publish and the
// view keeps its state.
func TestQuietWritesCopyNothing(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	w := fsys.w
	tx := func() *txBlocks {
		tb, _ := fsys.blocks.(*txBlocks)
		return tb
	}
	// A read publishes a view of the running transaction. No read held
	// it beside a run, so the run after it lets it go before it changes
	// anything: nothing is copied for it, nor later.
	if err := fsys.WriteFile("f0", stamped(0, 3000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := wantFile(fsys, "f0", stamped(0, 3000))(); err != nil {
		t.Fatal(err)
	}
	_, c0 := tx().tx.KeptVersions()
	if err := fsys.Chmod("f0", 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := fsys.WriteFile(fmt.Sprintf("f%d", i), stamped(uint64(i), 3000), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Chmod(fmt.Sprintf("f%d", i), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !w.stale.Load() {
		t.Fatal("runs without reads published a view")
	}
	if n, c := tx().tx.KeptVersions(); n != 0 || c != c0 {
		t.Fatalf("%d block versions kept, %d copied, while no read came", n, c-c0)
	}
	for i := range 40 {
		if err := wantFile(fsys, fmt.Sprintf("f%d", i), stamped(uint64(i), 3000))(); err != nil {
			t.Fatal("first read after quiet writes:", err)
		}
	}
	// Reads go on now: a run publishes, and a held view keeps its state
	// while later runs change the blocks it reads.
	r, release := fsys.reader()
	for i := range 40 {
		if err := fsys.WriteFile(fmt.Sprintf("f%d", i), stamped(uint64(100+i), 3000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if w.stale.Load() {
		t.Fatal("a run while reads go on left the view stale")
	}
	if n, _ := tx().tx.KeptVersions(); n == 0 {
		t.Fatal("no block kept for the view a read holds")
	}
	for i := range 40 {
		if err := wantFile(r, fmt.Sprintf("f%d", i), stamped(uint64(i), 3000))(); err != nil {
			t.Fatal("held view:", err)
		}
		if err := wantFile(fsys, fmt.Sprintf("f%d", i), stamped(uint64(100+i), 3000))(); err != nil {
			t.Fatal("new reads:", err)
		}
	}
	release()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
}

// TestReadsBetweenChanges: a caller that reads between its changes, one
// thing at a time (the FUSE mount's lookup before each create, its open
// after it, as tar makes files), costs no block copies for views and no
// read waits: each read publishes its own view while no run is in
// progress, and the next run lets it go before it changes anything. A
// read that comes while a run holds the lock then waits for that run (and
// sees its result); from then on runs publish their results, so reads
// beside later runs do not wait and see the state before them.
func TestReadsBetweenChanges(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	w := fsys.w
	w.mu.Lock()
	w.readWindow = time.Hour // the last part must not depend on the clock
	w.mu.Unlock()
	if err := fsys.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := fsys.Stat("d")
	if err != nil {
		t.Fatal(err)
	}
	dir := fi.Sys().(*Stat)
	copies := func() int64 {
		tb, _ := fsys.blocks.(*txBlocks)
		_, c := tb.tx.KeptVersions()
		return c
	}
	c0 := copies()
	mtime := time.Unix(1700000000, 0)
	for i := range 100 {
		name := fmt.Sprintf("f%d", i)
		if _, err := fsys.LookupInode(dir.Subvolume, dir.Ino, name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("lookup %s before it is made: %v", name, err)
		}
		st, err := fsys.CreateEmptyStat("d/"+name, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fsys.OpenInode(st.Subvolume, st.Ino)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(stamped(uint64(i), 5000), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.SetattrInode(st.Subvolume, st.Ino, AttrChange{UID: -1, GID: -1, Mtime: &mtime}); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := wantFile(fsys, "d/"+name, stamped(uint64(i), 5000))(); err != nil {
			t.Fatal(err)
		}
	}
	if c := copies() - c0; c != 0 {
		t.Errorf("%d blocks copied for views while reads came only between changes", c)
	}
	if w.lastOverlap.Load() != 0 {
		t.Error("a read was seen beside a run while reads came only between changes")
	}

	// A read while a run holds the lock waits for it.
	inRun, release := make(chan struct{}), make(chan struct{})
	letGo := sync.OnceFunc(func() { close(release) })
	defer letGo() // before Close, which waits for the held run
	var once sync.Once
	w.mu.Lock()
	w.midRun = func() { once.Do(func() { close(inRun); <-release }) }
	w.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- fsys.WriteFile("d/f0", stamped(1000, 5000), 0o644) }()
	<-inRun
	read := make(chan error, 1)
	go func() { read <- wantFile(fsys, "d/f0", stamped(1000, 5000))() }()
	for deadline := time.Now().Add(10 * time.Second); w.lastOverlap.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a read beside a run that let the view go was not seen waiting")
		}
	}
	select {
	case err := <-read:
		t.Fatalf("a read finished while the run held the lock and no view of its state was published (%v)", err)
	default:
	}
	letGo()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal("the read that waited:", err)
	}

	// Reads go on beside runs now: runs publish, and a read beside a
	// held run does not wait.
	c1 := copies()
	if err := fsys.Chmod("d/f1", 0o644); err != nil { // publishes the state it leaves
		t.Fatal(err)
	}
	inRun2, release2 := make(chan struct{}), make(chan struct{})
	letGo2 := sync.OnceFunc(func() { close(release2) })
	defer letGo2()
	var once2 sync.Once
	w.mu.Lock()
	w.midRun = func() { once2.Do(func() { close(inRun2); <-release2 }) }
	w.mu.Unlock()
	go func() { done <- fsys.WriteFile("d/f0", stamped(2000, 5000), 0o644) }()
	<-inRun2
	readsMustFinish(t, wantFile(fsys, "d/f0", stamped(1000, 5000)))
	letGo2()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	readsMustFinish(t, wantFile(fsys, "d/f0", stamped(2000, 5000)))
	if copies() == c1 {
		t.Error("no block copied for the view a run published while reads go on beside runs")
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
}

// TestLongReadsInPieces: reads longer than a view's piece (ReadFile,
// File.ReadAt, File.Read) return the whole contents, at piece boundaries
// and past them, and end at EOF as before.
func TestLongReadsInPieces(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	want := make([]byte, 2*viewPiece+12345)
	rand.New(rand.NewSource(1)).Read(want)
	if err := fsys.WriteFile("big", want, 0o644); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		got, err := fsys.ReadFile("big")
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: ReadFile: %d bytes (%v), equal %v", round, len(got), err, bytes.Equal(got, want))
		}
		f, err := fsys.OpenFile("big")
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, len(want)+100)
		n, err := f.ReadAt(p, 7)
		if n != len(want)-7 || err != io.EOF || !bytes.Equal(p[:n], want[7:]) {
			t.Fatalf("round %d: ReadAt: %d bytes (%v)", round, n, err)
		}
		all, err := io.ReadAll(struct{ io.Reader }{f})
		if err != nil || !bytes.Equal(all, want) {
			t.Fatalf("round %d: Read: %d bytes (%v)", round, len(all), err)
		}
		f.Close()
		if err := fsys.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}
