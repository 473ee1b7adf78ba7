package btrfs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// Power loss while File.Syncs go through the tree log (sync_log.go).
//
// A goroutine per file writes it and syncs it, all at once; the device's
// writes and syncs are recorded, and a crash image is built for
// each loss point as in TestCrashDuringConcurrentSyncs: the writes before
// it, those before its last sync durable, a random subset of the rest
// kept (whole or torn). The kernel mounts each crash image, replaying
// whatever log its superblock names, and then:
//   - every file reads as one of the versions it had after a write (or
//     as committed before the run), never a mix (a log sync takes every
//     file written since the last, so any write may be durable);
//   - and no older than its version at its last Sync that returned before
//     the loss;
//   - btrfs check --check-data-csum is clean after the replay, and
//     btrfs-progs 6.19's check (GOBTRFS_PROGS_DIR), which checks logs
//     too, is clean before it.
func TestCrashDuringLogSyncs(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x106))

	img := filepath.Join(t.TempDir(), "base.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 160 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Room in the chunks: a transaction that adds one commits at fsync.
	if err := fsys.WriteFile("filler", make([]byte, 48<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove("filler"); err != nil {
		t.Fatal(err)
	}
	const nfiles = 3
	// versions[f] are the contents file f had after each write,
	// versions[f][0] the committed one.
	versions := make([][][]byte, nfiles)
	cur := make([][]byte, nfiles)
	for f := range nfiles {
		cur[f] = bytes.Repeat([]byte{byte('a' + f)}, 20000+f*7000)
		if err := fsys.WriteFile(fmt.Sprintf("f%d", f), cur[f], 0o644); err != nil {
			t.Fatal(err)
		}
		versions[f] = [][]byte{slices.Clone(cur[f])}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	base := readImage(t, img)

	rec := &logRecorder{mem: base.mem(t), promised: make([]int, nfiles)}
	work := filepath.Join(t.TempDir(), "work.img")
	base.save(t, work)
	open := func(string, bool) (blockdev.Device, error) { return rec, nil }
	fsys, err = btrfs.OpenWritableWith(work, &btrfs.Options{CommitInterval: -1, DirtyLimit: -1}, blockdev.ScanOptions{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	files := make([]*btrfs.File, nfiles)
	for f := range nfiles {
		if files[f], err = fsys.OpenFile(fmt.Sprintf("f%d", f)); err != nil {
			t.Fatal(err)
		}
	}
	// One goroutine per file: each writes its file and syncs it, so
	// Syncs and writes of different files meet in the change batches.
	ops := 20
	if longTests() {
		ops = 80
	}
	var wg sync.WaitGroup
	for f := range nfiles {
		frng := rand.New(rand.NewPCG(rng.Uint64(), uint64(f)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ops {
				if frng.IntN(3) == 0 {
					n := len(versions[f]) - 1 // the version now
					if err := files[f].Sync(); err != nil {
						t.Error(err)
						return
					}
					rec.mu.Lock()
					rec.promised[f] = n
					rec.mu.Unlock()
					continue
				}
				off := frng.IntN(len(cur[f]) + 4096)
				p := bytes.Repeat([]byte{byte(frng.IntN(250) + 1)}, 1+frng.IntN(12000))
				if _, err := files[f].WriteAt(p, int64(off)); err != nil {
					t.Error(err)
					return
				}
				if end := off + len(p); end > len(cur[f]) {
					cur[f] = append(cur[f], make([]byte, end-len(cur[f]))...)
				}
				copy(cur[f][off:], p)
				// A log sync takes every file written since the last,
				// so any version may become durable, not only those
				// a Sync of the file asked for.
				versions[f] = append(versions[f], slices.Clone(cur[f]))
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	wc, err := fsys.WriteCounters()
	if err != nil {
		t.Fatal(err)
	}
	if wc.LogSyncs == 0 || wc.Commits != 0 {
		t.Fatalf("%d log syncs and %d commits: the run must sync through the log only", wc.LogSyncs, wc.Commits)
	}
	// No Close: the run ends as a crash after everything would.
	rec.mu.Lock()
	log := slices.Clone(rec.log)
	rec.mu.Unlock()
	live := make([]liveRecord, len(log))
	for i, r := range log {
		live[i] = liveRecord{sync: r.sync, off: r.off, data: r.data}
	}
	pts := liveLossPoints(live, rng, longTests())
	if !longTests() && len(pts) > 16 {
		rng.Shuffle(len(pts), func(i, j int) { pts[i], pts[j] = pts[j], pts[i] })
		pts = append([]int{len(log)}, pts[:15]...)
		slices.Sort(pts)
		pts = slices.Compact(pts)
	}
	t.Logf("seed %d: %d log syncs, %d writes and syncs recorded, %d loss points", seed, wc.LogSyncs, len(log), len(pts))

	dev := base.mem(t)
	applied := 0
	for pi, i := range pts {
		for ; applied < i; applied++ {
			if r := log[applied]; r.sync {
				if err := dev.Sync(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := dev.WriteAt(r.data, r.off); err != nil {
				t.Fatal(err)
			}
		}
		var crash *blockdev.Mem
		promised := make([]int, nfiles)
		if i == len(log) {
			crash = dev.Clone()
			crash.Sync()
			copy(promised, rec.promised) // the run is over: no lock needed
		} else {
			if pi%2 == 1 {
				crash = dev.CrashCloneTorn(rng, 4096)
			} else {
				crash = dev.CrashClone(rng)
			}
			promised = log[i].promised
		}
		what := fmt.Sprintf("loss before record %d of %d (promised %v)", i, len(log), promised)
		p := filepath.Join(t.TempDir(), "crash.img")
		crashImageOf(t, crash, crash.Size()).save(t, p)
		btrfstest.CheckNewer(t, p, true)
		// Our replays: into memory (Open) and into the image
		// (OpenWritable, on a copy), each must show what the kernel's
		// does.
		ours := readOurs(t, p, nfiles, false)
		p2 := filepath.Join(t.TempDir(), "crash2.img")
		crashImageOf(t, crash, crash.Size()).save(t, p2)
		oursRW := readOurs(t, p2, nfiles, true)
		btrfstest.Check(t, []string{p2}, true)
		dir := btrfstest.Mount(t, "", p)
		for f := range nfiles {
			got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%d", f)))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !bytes.Equal(got, ours[f]) || !bytes.Equal(got, oursRW[f]) {
				t.Errorf("%s: f%d: the kernel's replay reads %d bytes, Open's %d, OpenWritable's %d, not all equal",
					what, f, len(got), len(ours[f]), len(oursRW[f]))
			}
			v := slices.IndexFunc(versions[f], func(b []byte) bool { return bytes.Equal(b, got) })
			switch {
			case v < 0:
				t.Errorf("%s: f%d (%d bytes) is none of the versions it had", what, f, len(got))
			case v < promised[f] && !slices.ContainsFunc(versions[f][promised[f]:], func(b []byte) bool { return bytes.Equal(b, got) }):
				t.Errorf("%s: f%d is version %d, older than the one its last returned Sync made durable (%d)", what, f, v, promised[f])
			}
		}
		btrfstest.Unmount(t, dir)
		btrfstest.Check(t, []string{p}, true)
		if t.Failed() {
			t.FailNow()
		}
	}
	for _, f := range files {
		f.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
}

// readOurs reads the files f0... of img through our own log replay:
// Open's, into memory, or OpenWritable's, into the image (then closed).
func readOurs(t *testing.T, img string, n int, writable bool) [][]byte {
	t.Helper()
	var (
		fsys *btrfs.FS
		err  error
	)
	if writable {
		fsys, err = btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1})
	} else {
		fsys, err = btrfs.Open(img, nil)
	}
	if err != nil {
		t.Fatalf("open (writable %v): %v", writable, err)
	}
	defer fsys.Close()
	out := make([][]byte, n)
	for f := range n {
		if out[f], err = fsys.ReadFile(fmt.Sprintf("f%d", f)); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// logRecorder is the device of TestCrashDuringLogSyncs: an in-memory
// image whose writes and syncs are logged in order, each with the files'
// promised versions when it was issued.
type logRecorder struct {
	mem *blockdev.Mem

	mu       sync.Mutex
	log      []logRecord
	promised []int
}

type logRecord struct {
	sync     bool
	off      int64
	data     []byte
	promised []int
}

func (d *logRecorder) ReadAt(p []byte, off int64) (int, error) { return d.mem.ReadAt(p, off) }

func (d *logRecorder) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := d.mem.WriteAt(p, off)
	if err != nil {
		return n, err
	}
	d.log = append(d.log, logRecord{off: off, data: slices.Clone(p), promised: slices.Clone(d.promised)})
	return n, nil
}

func (d *logRecorder) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = append(d.log, logRecord{sync: true, promised: slices.Clone(d.promised)})
	return d.mem.Sync()
}

func (d *logRecorder) Size() int64  { return d.mem.Size() }
func (d *logRecorder) Close() error { return nil }
