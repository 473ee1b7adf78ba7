//go:build linux

package btrfs_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestLogReplayCrash cuts the power at every sync and superblock write,
// and at a sample of the other writes (all of them with GOBTRFS_LONG=1),
// of the commit a writable open makes of its log replay. Each crash image
// either still has its log (the old superblock: our read-only open, and
// the kernel's mount where it can run, replay it) or is replayed (log_root
// 0); both show what the kernel showed after its replay, open for writing,
// and pass btrfs check.
func TestLogReplayCrash(t *testing.T) {
	btrfstest.RequireProgs(t)
	const name = "log-new-files"
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 16))
	want := btrfstest.LoadManifest(t, name)
	base := readImage(t, btrfstest.OpenFixture(t, name))
	work := filepath.Join(t.TempDir(), "work.img")

	rec := replayWithLoss(t, base, work, lossPoint{}, false, rng)
	if rec.err != nil {
		t.Fatalf("replay without a loss: %v", rec.err)
	}
	pts := dataLossPoints(rec.ops, rng, os.Getenv("GOBTRFS_LONG") == "1")
	states := map[string]int{}
	// The run without a loss comes first: it must be replayed.
	pts = append([]lossPoint{{}}, pts...)
	for i, lp := range pts {
		torn := i%2 == 1
		run := rec
		if lp.n > 0 {
			run = replayWithLoss(t, base, work, lp, torn, rng)
			if !run.lost {
				t.Fatalf("loss point %v never reached", lp)
			}
		}
		path := filepath.Join(t.TempDir(), "crash.img")
		crashImageOf(t, run.disk, run.disk.Size()).save(t, path)
		state := "replayed"
		if logRootOf(t, path) != 0 {
			state = "log kept"
		}
		states[state]++
		if lp.n == 0 && state != "replayed" {
			t.Fatal("log_root still set after a replay without a loss")
		}
		ro, err := btrfs.Open(path, nil)
		if err != nil {
			t.Fatalf("loss at %v (%s): open: %v", lp, state, err)
		}
		diffTrees(t, "after a loss at "+lossName(lp)+" ("+state+")", want, ops2Read(t, ro))
		ro.Close()
		btrfstest.Check(t, []string{path}, true)
		if state == "log kept" && btrfstest.Interop() && states[state] <= 2 {
			diffTrees(t, "kernel after a loss ("+state+")", want, kernelView(t, path))
		}
		w, err := btrfs.OpenWritable(path, nil)
		if err != nil {
			t.Fatalf("loss at %v (%s): open for writing: %v", lp, state, err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("loss at %v (%s): close: %v", lp, state, err)
		}
		btrfstest.Check(t, []string{path}, true)
	}
	t.Logf("seed %d: %d loss points: %v", seed, len(pts), states)
	if states["log kept"] == 0 {
		t.Errorf("loss states %v: no loss kept the log", states)
	}
}

// lossName names a loss point for messages.
func lossName(lp lossPoint) string { return fmt.Sprintf("%v", lp) }

// replayWithLoss writes base to work and opens it for writing (which
// replays its log and commits) with the power cut at lp (never when lp.n
// is 0), counting every write and sync from the open on.
func replayWithLoss(t *testing.T, base *crashImage, work string, lp lossPoint, torn bool, rng *rand.Rand) *lossRun {
	t.Helper()
	base.save(t, work)
	mem := base.mem(t)
	run := &lossRun{armed: true}
	open := func(path string, readOnly bool) (blockdev.Device, error) {
		f, err := blockdev.OpenFile(path, readOnly)
		if err != nil {
			return nil, err
		}
		faulty := blockdev.NewFaulty(&teeDevice{file: f, mem: mem})
		faulty.SetHook(func(op blockdev.FaultOp) error {
			run.mu.Lock()
			defer run.mu.Unlock()
			if op.Op == blockdev.OpRead {
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
	fsys, err := btrfs.OpenWritableWith(work, nil, blockdev.ScanOptions{Open: open})
	if err == nil {
		err = fsys.Close()
	}
	if err != nil && !errors.Is(err, errPowerLost) {
		t.Fatalf("replay: %v", err)
	}
	run.err = err
	if run.disk == nil {
		run.disk = mem.CrashClone(rng)
	}
	return run
}
