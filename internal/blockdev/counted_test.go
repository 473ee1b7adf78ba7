package blockdev

import (
	"sync/atomic"
	"testing"
)

func TestCounted(t *testing.T) {
	var n atomic.Int64
	a, b := NewCounted(NewMem(1<<20), &n), NewCounted(NewMem(1<<20), &n)
	if _, err := a.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAt(make([]byte, 100), 8192); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAt(make([]byte, 100), 1<<20); err == nil {
		t.Fatal("write past the end accepted")
	}
	buf := make([]byte, 10)
	if _, err := a.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 4196 {
		t.Errorf("counted %d bytes, want 4196", got)
	}
}
