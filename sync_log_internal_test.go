package btrfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestLogBatchWriteAfterSync: a Sync and, after it, a write to the same
// file run in one change batch (writer.combine). After a second Sync a
// replay of the log shows both writes: the write in the batch is never
// taken for logged when it is not.
func TestLogBatchWriteAfterSync(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.WriteFile("f", make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile("g", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := bytes.Repeat([]byte{1}, 4096)
	if _, err := f.WriteAt(first, 0); err != nil {
		t.Fatal(err)
	}
	// Hold the lock so that a change becomes the combiner and waits;
	// then queue the Sync and the write behind it: they run as one
	// batch, the Sync first.
	w := fsys.w
	queued := func(n int) {
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
	w.mu.Lock()
	done := make(chan error, 3)
	go func() { _, err := fsys.WriteAt("g", []byte("x"), 0); done <- err }()
	for {
		// The change is the combiner once it has taken its batch: it
		// then waits for the lock.
		w.qmu.Lock()
		taken := w.combining && len(w.queue) == 0
		w.qmu.Unlock()
		if taken {
			break
		}
		time.Sleep(time.Millisecond)
	}
	go func() { done <- f.Sync() }()
	queued(1)
	second := bytes.Repeat([]byte{2}, 4096)
	go func() { _, err := f.WriteAt(second, 8192); done <- err }()
	queued(2)
	w.mu.Unlock()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// The write may have gone into the batch's log sync (every dirty
	// file is logged at the end of the batch) or wait for this one.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if wc, _ := fsys.WriteCounters(); wc.LogSyncs == 0 || wc.Commits != 1 {
		t.Fatalf("%d log syncs and %d commits, want some and 1", wc.LogSyncs, wc.Commits)
	}
	// A crash now: the replayed file holds both writes.
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	crash := filepath.Join(t.TempDir(), "crash.img")
	if err := os.WriteFile(crash, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(crash, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.ReadFile("f")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:4096], first) || !bytes.Equal(got[8192:8192+4096], second) {
		t.Fatal("the replayed file lacks a synced write")
	}
}
