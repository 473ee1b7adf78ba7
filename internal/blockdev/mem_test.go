package blockdev_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
)

// memWrite is a write the tests remember so they can enumerate outcomes.
type memWrite struct {
	off  int64
	data []byte
}

func apply(img []byte, ws []memWrite, keep func(i int) bool) []byte {
	out := append([]byte(nil), img...)
	for i, w := range ws {
		if keep(i) {
			copy(out[w.off:], w.data)
		}
	}
	return out
}

func readAll(t testing.TB, d blockdev.Device) []byte {
	t.Helper()
	b := make([]byte, d.Size())
	if n, err := d.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("read all: %d %v", n, err)
	}
	return b
}

func TestMemReadWrite(t *testing.T) {
	d := blockdev.NewMem(200 << 10)
	p := bytes.Repeat([]byte{7}, 100<<10) // crosses page boundaries
	if n, err := d.WriteAt(p, 30<<10); n != len(p) || err != nil {
		t.Fatal(n, err)
	}
	got := make([]byte, len(p)+2)
	if _, err := d.ReadAt(got, 30<<10-1); err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 || got[len(got)-1] != 0 || !bytes.Equal(got[1:len(got)-1], p) {
		t.Fatal("read back differs")
	}
	// Reads at the end are short with io.EOF; writes past the end fail whole.
	if n, err := d.ReadAt(make([]byte, 10), d.Size()-4); n != 4 || err != io.EOF {
		t.Fatalf("short read: %d %v", n, err)
	}
	if n, err := d.ReadAt(make([]byte, 10), d.Size()); n != 0 || err != io.EOF {
		t.Fatalf("read at end: %d %v", n, err)
	}
	if _, err := d.WriteAt(make([]byte, 10), d.Size()-4); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("write past end: %v", err)
	}
	if _, err := d.ReadAt(make([]byte, 1), -1); !errors.Is(err, blockdev.ErrOutOfRange) {
		t.Fatalf("negative offset: %v", err)
	}
	d.Close()
	if _, err := d.ReadAt(make([]byte, 1), 0); !errors.Is(err, blockdev.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

// TestMemCrashClone checks that every crash clone equals the synced state
// plus some subset of the unsynced writes applied in order, and that over
// many clones both extremes occur.
func TestMemCrashClone(t *testing.T) {
	rng := newRand(t)
	const size = 64 << 10
	d := blockdev.NewMem(size)
	randWrite := func() memWrite {
		n := 1 + rng.IntN(8<<10)
		w := memWrite{off: rng.Int64N(size - int64(n)), data: make([]byte, n)}
		for i := range w.data {
			w.data[i] = byte(rng.Uint32() | 1)
		}
		return w
	}
	for range 5 {
		w := randWrite()
		d.WriteAt(w.data, w.off)
	}
	d.Sync()
	synced := readAll(t, d)
	var ws []memWrite
	for range 6 {
		w := randWrite()
		ws = append(ws, w)
		d.WriteAt(w.data, w.off)
	}
	if d.Unsynced() != len(ws) {
		t.Fatalf("unsynced %d, want %d", d.Unsynced(), len(ws))
	}
	current := readAll(t, d)
	outcomes := make(map[int]bool)
	for range 100 {
		got := readAll(t, d.CrashClone(rng))
		found := -1
		for mask := range 1 << len(ws) {
			if bytes.Equal(got, apply(synced, ws, func(i int) bool { return mask&(1<<i) != 0 })) {
				found = mask
				break
			}
		}
		if found < 0 {
			t.Fatal("crash clone is not the synced state plus a subset of the writes")
		}
		outcomes[found] = true
	}
	if len(outcomes) < 10 {
		t.Fatalf("only %d distinct crash outcomes in 100 clones", len(outcomes))
	}
	if !bytes.Equal(readAll(t, d), current) {
		t.Fatal("CrashClone changed the device")
	}
	if !bytes.Equal(readAll(t, d.Clone()), current) {
		t.Fatal("Clone differs")
	}
}

// TestMemCrashCloneTorn checks torn clones unit by unit: within each unit
// the contents must be the synced state plus some subset of the writes.
func TestMemCrashCloneTorn(t *testing.T) {
	rng := newRand(t)
	const size, unit = 64 << 10, 4096
	d := blockdev.NewMem(size)
	synced := readAll(t, d)
	var ws []memWrite
	for range 5 {
		n := 1 + rng.IntN(3*unit)
		w := memWrite{off: rng.Int64N(size - int64(n)), data: bytes.Repeat([]byte{byte(1 + len(ws))}, n)}
		ws = append(ws, w)
		d.WriteAt(w.data, w.off)
	}
	torn := false
	for range 100 {
		got := readAll(t, d.CrashCloneTorn(rng, unit))
		whole := false
		for mask := range 1 << len(ws) {
			if bytes.Equal(got, apply(synced, ws, func(i int) bool { return mask&(1<<i) != 0 })) {
				whole = true
			}
		}
		torn = torn || !whole
		for u := 0; u < size; u += unit {
			ok := false
			for mask := range 1 << len(ws) {
				want := apply(synced, ws, func(i int) bool { return mask&(1<<i) != 0 })
				if bytes.Equal(got[u:u+unit], want[u:u+unit]) {
					ok = true
					break
				}
			}
			if !ok {
				t.Fatalf("unit at %d is no subset of the writes", u)
			}
		}
	}
	if !torn {
		t.Fatal("no torn write in 100 torn clones")
	}
}
