package btrfs

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// waitQueued returns once n changes wait for the combiner.
func waitQueued(w *writer, n int) {
	for {
		w.qmu.Lock()
		q := len(w.queue)
		w.qmu.Unlock()
		if q >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestParallelFileWrites: writes and truncates through open Files of
// different files run in parallel (runParallel), those of one file in
// arrival order; the result equals running them one by one. A batch is
// built by holding the writer's lock while the changes queue, so the
// parallel run is certain, not a matter of timing. Then 16 goroutines
// write, truncate and sync at random (two per file, each in its own half),
// beside readers. btrfs check, our read-only open and the kernel's mount
// equal the model.
func TestParallelFileWrites(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 512 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	const nfiles, half = 8, 256 << 10
	model := make([][]byte, nfiles)
	files := make([]*File, nfiles)
	for i := range nfiles {
		name := fmt.Sprintf("f%d", i)
		model[i] = bytes.Repeat([]byte{byte(i)}, 64<<10)
		if err := fsys.WriteFile(name, model[i], 0o644); err != nil {
			t.Fatal(err)
		}
		if files[i], err = fsys.OpenFile(name); err != nil {
			t.Fatal(err)
		}
		defer files[i].Close()
	}
	if err := fsys.WriteFile("g", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	apply := func(i int, p []byte, off int) {
		if end := off + len(p); end > len(model[i]) {
			model[i] = append(model[i], make([]byte, end-len(model[i]))...)
		}
		copy(model[i][off:], p)
	}

	// One batch, in an order we choose.
	w := fsys.w
	before, _ := fsys.WriteCounters()
	w.mu.Lock()
	errs := make(chan error, 64)
	go func() { _, err := fsys.WriteAt("g", []byte("x"), 0); errs <- err }()
	waitQueued(w, 0)
	time.Sleep(10 * time.Millisecond) // the combiner now waits for the lock
	queued, n := 0, 1
	queue := func(f func() error) {
		go func() { errs <- f() }()
		queued++
		n++
		waitQueued(w, queued)
	}
	rng := rand.New(rand.NewSource(1))
	for round := range 3 {
		for i := range nfiles {
			// Aligned, unaligned (a read of the sector's old bytes), and
			// on file 0 the same range over and over: the last must win.
			off := rng.Intn(96<<10) &^ 4095
			if round == 1 {
				off = rng.Intn(96 << 10)
			}
			if i == 0 {
				off = 4096
			}
			p := bytes.Repeat([]byte{byte(16*round + i + 1)}, 4096+rng.Intn(3)*4096)
			apply(i, p, off)
			f := files[i]
			queue(func() error { _, err := f.WriteAt(p, int64(off)); return err })
		}
	}
	{
		i := 5
		model[i] = model[i][:5000]
		queue(func() error { return files[i].Truncate(5000) })
	}
	w.mu.Unlock()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	after, _ := fsys.WriteCounters()
	if got := after.ParallelChanges - before.ParallelChanges; got != int64(queued) {
		t.Errorf("%d of %d queued changes ran in parallel", got, queued)
	}
	check := func(when string) {
		t.Helper()
		for i := range nfiles {
			b, err := fsys.ReadFile(fmt.Sprintf("f%d", i))
			if err != nil || !bytes.Equal(b, model[i]) {
				t.Fatalf("%s: f%d: %d bytes, want %d (%v)", when, i, len(b), len(model[i]), err)
			}
		}
	}
	check("after the batch")

	// At random: two writers per file, each in its own half, with Syncs,
	// Truncates of the writer's own tail half, and readers beside them.
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	for i := range nfiles {
		if len(model[i]) < 2*half {
			model[i] = append(model[i], make([]byte, 2*half-len(model[i]))...)
		}
		if _, err := files[i].WriteAt(model[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex // guards model
	var wg sync.WaitGroup
	stop := make(chan struct{})
	fail := make(chan error, 64)
	for g := range 2 * nfiles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(g)))
			i, lo := g%nfiles, (g/nfiles)*half
			for range 150 {
				switch r := rng.Intn(20); {
				case r == 0:
					if err := files[i].Sync(); err != nil {
						fail <- err
						return
					}
				case r == 1 && lo > 0:
					// Only the upper half's writer truncates, within its half.
					size := lo + rng.Intn(half)
					mu.Lock()
					err := files[i].Truncate(int64(size))
					if err == nil {
						model[i] = append(model[i][:size:size], make([]byte, 2*half-size)...)
					}
					mu.Unlock()
					if err != nil {
						fail <- err
						return
					}
					// Back to full size so the lower writer's reads of
					// the model stay in range.
					mu.Lock()
					err = files[i].Truncate(2 * half)
					mu.Unlock()
					if err != nil {
						fail <- err
						return
					}
				default:
					n := 1 + rng.Intn(16<<10)
					off := lo + rng.Intn(half-n)
					p := make([]byte, n)
					rng.Read(p)
					if _, err := files[i].WriteAt(p, int64(off)); err != nil {
						fail <- err
						return
					}
					mu.Lock()
					copy(model[i][off:], p)
					mu.Unlock()
				}
			}
		}()
	}
	var rwg sync.WaitGroup
	for r := range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("f%d", (k+r)%nfiles)
				if _, err := fsys.ReadFile(name); err != nil {
					fail <- fmt.Errorf("read %s: %w", name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	check("after the random writers")
	final, _ := fsys.WriteCounters()
	t.Logf("changes %d, in parallel %d", final.Changes, final.ParallelChanges)
	for _, f := range files {
		f.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	ro, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range nfiles {
		if b, err := ro.ReadFile(fmt.Sprintf("f%d", i)); err != nil || !bytes.Equal(b, model[i]) {
			t.Errorf("read-only open: f%d differs (%v)", i, err)
		}
	}
	ro.Close()
	if !btrfstest.Interop() {
		return
	}
	mnt := btrfstest.Mount(t, "ro", img)
	for i := range nfiles {
		if b, err := os.ReadFile(filepath.Join(mnt, fmt.Sprintf("f%d", i))); err != nil || !bytes.Equal(b, model[i]) {
			t.Errorf("kernel: f%d differs (%v)", i, err)
		}
	}
}
