//go:build linux

package btrfs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestKindsPowerLoss cuts the power during a transaction on RAID1C3 and
// RAID5 filesystems made by mkfs.btrfs (several devices, parity): every
// write and sync to any device from the loss on fails, what was written
// before stays. At every loss point over the transaction's writes
// (its data, its tree blocks, the superblocks of every device), the
// devices must pass btrfs check with data checksums and hold exactly the
// files before or after the transaction; around the superblock writes,
// where the devices may be left one generation apart, we write on and
// check again. (The single-device power-loss
// tests, write_crash_test.go, also drop unsynced writes; here the writes
// that went out stay, which is what a multi-device commit's ordering is
// about.)
func TestKindsPowerLoss(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, c := range []struct {
		profile string
		devs    int
	}{{"raid1c3", 3}, {"raid5", 3}} {
		t.Run(c.profile, func(t *testing.T) {
			devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{Size: 128 << 20, NumDevices: c.devs, DataProfile: c.profile, MetadataProfile: c.profile})
			src := rand.NewChaCha8([32]byte{7})
			file := func(n int) []byte { b := make([]byte, n); src.Read(b); return b }
			before := map[string][]byte{"a": file(300 << 10), "b": file(5000), "c": file(70 << 10)}
			fsys, err := btrfs.OpenWritable(devs[0], &btrfs.Options{Devices: devs[1:]})
			if err != nil {
				t.Fatal(err)
			}
			for name, data := range before {
				if err := fsys.WriteFile(name, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			base := make([]*crashImage, len(devs))
			for i, d := range devs {
				base[i] = readImage(t, d)
			}
			after := map[string][]byte{"a": before["a"], "c": bytes.Repeat([]byte("c"), 9000), "d": file(200 << 10), "e": []byte("e\n")}
			change := func(fsys *btrfs.FS) error {
				if err := fsys.Remove("b"); err != nil {
					return err
				}
				for _, name := range []string{"c", "d", "e"} {
					if err := fsys.WriteFile(name, after[name], 0o644); err != nil {
						return err
					}
				}
				return fsys.Commit()
			}
			work := t.TempDir()
			// run restores the base images and makes the change, losing
			// the power before the lossAt-th write or sync (0: never); it
			// returns how many writes and syncs were attempted.
			run := func(lossAt int) (paths []string, ops int, err error) {
				for i, b := range base {
					paths = append(paths, filepath.Join(work, fmt.Sprintf("dev%d.img", i)))
					b.save(t, paths[i])
				}
				var mu sync.Mutex
				lost := false
				open := func(path string, readOnly bool) (blockdev.Device, error) {
					f, err := blockdev.OpenFile(path, readOnly)
					if err != nil {
						return nil, err
					}
					faulty := blockdev.NewFaulty(f)
					faulty.SetHook(func(op blockdev.FaultOp) error {
						if op.Op == blockdev.OpRead {
							return nil
						}
						mu.Lock()
						defer mu.Unlock()
						ops++
						if lossAt > 0 && ops >= lossAt {
							lost = true
						}
						if lost {
							return errPowerLost
						}
						return nil
					})
					return faulty, nil
				}
				fsys, err := btrfs.OpenWritableWith(paths[0], &btrfs.Options{Devices: paths[1:]}, blockdev.ScanOptions{Open: open})
				if err != nil {
					t.Fatalf("open for writing: %v", err)
				}
				err = change(fsys)
				fsys.Close()
				if lossAt > 0 && !lost {
					t.Fatalf("loss at %d of %d: not reached", lossAt, ops)
				}
				return paths, ops, err
			}
			paths, total, err := run(0)
			if err != nil {
				t.Fatalf("without a loss: %v", err)
			}
			if st := kindsState(t, paths, before, after); st != "after" {
				t.Fatalf("without a loss: %s state", st)
			}
			states := map[string]int{}
			for p := 1; p <= total; p++ {
				paths, _, err := run(p)
				if err == nil {
					t.Fatalf("loss at %d of %d: the change succeeded", p, total)
				}
				btrfstest.CheckPowerLoss(t, paths, true)
				states[kindsState(t, paths, before, after)]++
				if p > total-8 {
					// Around the superblock writes the devices may be at
					// two generations: writing on must work and stay
					// clean.
					fsys, err := btrfs.OpenWritable(paths[0], &btrfs.Options{Devices: paths[1:]})
					if err != nil {
						t.Fatalf("loss at %d of %d: open for writing: %v", p, total, err)
					}
					if err := fsys.WriteFile("z", []byte("on\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					if err := fsys.Close(); err != nil {
						t.Fatal(err)
					}
					btrfstest.CheckPowerLoss(t, paths, true)
				}
			}
			t.Logf("%d writes and syncs; after the losses: %v", total, states)
			if states["before"] == 0 {
				t.Error("no loss left the old state")
			}
		})
	}
}

// kindsState reads the files of the filesystem on paths and says which of
// before and after they are.
func kindsState(t *testing.T, paths []string, before, after map[string][]byte) string {
	t.Helper()
	fsys, err := btrfs.Open(paths[0], &btrfs.Options{Devices: paths[1:]})
	if err != nil {
		t.Fatalf("open after the loss: %v", err)
	}
	defer fsys.Close()
	got := map[string][]byte{}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		if b, err := fsys.ReadFile(name); err == nil {
			got[name] = b
		}
	}
	same := func(want map[string][]byte) bool {
		if len(got) != len(want) {
			return false
		}
		for name, w := range want {
			if !bytes.Equal(got[name], w) {
				return false
			}
		}
		return true
	}
	switch {
	case same(before):
		return "before"
	case same(after):
		return "after"
	}
	t.Fatalf("files are neither the old nor the new state (%d files)", len(got))
	return ""
}
