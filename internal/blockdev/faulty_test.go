package blockdev_test

import (
	"errors"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
)

func TestFaulty(t *testing.T) {
	m := blockdev.NewMem(1 << 20)
	f := blockdev.NewFaulty(m)
	buf := make([]byte, 10)
	f.FailAt(blockdev.OpWrite, 2, false)
	if _, err := f.WriteAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1}, 0); !errors.Is(err, blockdev.ErrInjected) {
		t.Fatalf("second write: %v", err)
	}
	if m.Unsynced() != 1 {
		t.Fatal("failed write reached the device")
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		t.Fatalf("third write should pass: %v", err)
	}
	f.FailAt(blockdev.OpRead, 1, true)
	for i := range 3 {
		if _, err := f.ReadAt(buf, 0); !errors.Is(err, blockdev.ErrInjected) {
			t.Fatalf("sticky read %d: %v", i, err)
		}
	}
	f.FailAt(blockdev.OpRead, 0, false)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	f.SetErr(boom)
	f.FailAt(blockdev.OpSync, 1, false)
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Fatalf("sync: %v", err)
	}
	if err := f.Sync(); err != nil || m.Syncs() != 1 {
		t.Fatalf("second sync: %v, %d syncs", err, m.Syncs())
	}
	f.SetHook(func(op blockdev.FaultOp) error {
		if op.Op == blockdev.OpRead && op.Off >= 4096 {
			return boom
		}
		return nil
	})
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(buf, 4096); !errors.Is(err, boom) {
		t.Fatalf("hook: %v", err)
	}
	if f.Count(blockdev.OpRead) != 6 || f.Count(blockdev.OpWrite) != 3 || f.Count(blockdev.OpSync) != 2 {
		t.Fatalf("counts %d %d %d", f.Count(blockdev.OpRead), f.Count(blockdev.OpWrite), f.Count(blockdev.OpSync))
	}
}
