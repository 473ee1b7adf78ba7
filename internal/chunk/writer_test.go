package chunk_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// wrig is a Map of two adjacent chunks of one geometry on zeroed memory
// devices, with a model of the logical bytes (zeros to start with, which is
// also what parity over zeroed devices is).
type wrig struct {
	profile string
	n       int
	d       int // data columns per row (1 for mirrored profiles)
	base    disk.LogicalAddr
	items   []*disk.ChunkItem
	m       *chunk.Map
	mems    map[disk.DevID]*blockdev.Mem
	model   []byte
}

// newWrig builds the rig: stripe k on devid k+1 (DUP: both on devid 1),
// each chunk rows full rows long, stripes at sector- but not
// stripe-aligned device offsets.
func newWrig(t testing.TB, profile string, n, rows int) *wrig {
	r := &wrig{profile: profile, n: n, base: 5<<30 + 7*S, m: chunk.NewMap(4096), mems: map[disk.DevID]*blockdev.Mem{}}
	devids := make([]disk.DevID, n)
	for k := range n {
		devids[k] = disk.DevID(k + 1)
		if profile == "dup" {
			devids[k] = 1
		}
	}
	probe := mkChunk(profile, 1<<20, devids, make([]disk.PhysicalAddr, n))
	r.d = int(1 << 20 / chunk.StripeSizeOnDevice(probe))
	length := uint64(rows * r.d * S)
	stripeSize := length / uint64(r.d)
	l := r.base
	for c := range 2 {
		offs := make([]disk.PhysicalAddr, n)
		for k := range n {
			offs[k] = disk.PhysicalAddr(1<<20 + uint64(c*n+k)*(stripeSize+S) + uint64(4096*(k+1)))
		}
		it := mkChunk(profile, length, devids, offs)
		if err := r.m.Add(l, it); err != nil {
			t.Fatal(err)
		}
		r.items = append(r.items, it)
		l += disk.LogicalAddr(length)
	}
	for _, id := range devids {
		if r.mems[id] == nil {
			r.mems[id] = blockdev.NewMem(int64(1<<20 + uint64(2*n)*(stripeSize+S) + 1<<20))
		}
	}
	r.model = make([]byte, 2*length)
	return r
}

// devices returns the devices as a set, without those dropped.
func (r *wrig) devices(drop ...disk.DevID) map[disk.DevID]blockdev.Device {
	devs := map[disk.DevID]blockdev.Device{}
	for id, d := range r.mems {
		devs[id] = d
	}
	for _, id := range drop {
		delete(devs, id)
	}
	return devs
}

// write writes b at model offset off through w and records it.
func (r *wrig) write(t testing.TB, w *chunk.Writer, off int, b []byte) {
	t.Helper()
	if err := w.WriteLogical(b, r.base+disk.LogicalAddr(off)); err != nil {
		t.Fatalf("write %d+%d: %v", off, len(b), err)
	}
	copy(r.model[off:], b)
}

// randomWrite picks an offset and a length: mostly small and unaligned,
// sometimes spanning elements and rows, sometimes whole aligned rows.
func (r *wrig) randomWrite(rng *rand.Rand) (int, []byte) {
	total := len(r.model)
	rowLen := r.d * S
	var off, n int
	switch rng.IntN(5) {
	case 0, 1:
		off = rng.IntN(total)
		n = 1 + rng.IntN(min(total-off, 3*4096))
	case 2:
		off = rng.IntN(total)
		n = 1 + rng.IntN(min(total-off, 3*S))
	case 3:
		off = rng.IntN(total)
		n = 1 + rng.IntN(min(total-off, 2*rowLen+S))
	default:
		rows := total / rowLen
		first := rng.IntN(rows)
		off = first * rowLen
		n = (1 + rng.IntN(min(rows-first, 3))) * rowLen
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return off, b
}

// readDev reads n bytes of stripe k of chunk c at row rel (times S).
func (r *wrig) readDev(t testing.TB, c, k int, rel uint64, n int) []byte {
	t.Helper()
	st := r.items[c].Stripes[k]
	b := make([]byte, n)
	if _, err := r.mems[st.DevID].ReadAt(b, int64(st.Offset)+int64(rel*S)); err != nil {
		t.Fatal(err)
	}
	return b
}

// checkAll checks the read-back, every copy and, for RAID5/6, the parity
// and degraded reads.
func (r *wrig) checkAll(t *testing.T) {
	t.Helper()
	got := make([]byte, len(r.model))
	if err := chunk.NewReader(r.m, r.devices()).ReadLogical(got, r.base, nil); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if i := firstDiff(got, r.model); i >= 0 {
		t.Fatalf("read back differs at offset %d", i)
	}
	r.checkCopies(t)
	if r.profile == "raid5" || r.profile == "raid6" {
		r.checkParity(t)
		r.checkDegraded(t)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// checkCopies compares every copy of every element, placed by the test's
// own layout, with the model.
func (r *wrig) checkCopies(t *testing.T) {
	t.Helper()
	length := int(r.items[0].Length)
	elements := length / S
	pl := layout(r.profile, r.n, elements)
	for c := range r.items {
		for e := range elements {
			want := r.model[c*length+e*S : c*length+(e+1)*S]
			for _, cp := range pl[e].copies {
				if got := r.readDev(t, c, cp.stripe, cp.rel, S); !bytes.Equal(got, want) {
					t.Fatalf("chunk %d element %d: copy on stripe %d differs at %d", c, e, cp.stripe, firstDiff(got, want))
				}
			}
		}
	}
}

// checkParity recomputes P and Q of every row from the model with the
// test's own bit-by-bit GF(2^8) arithmetic and compares with the devices.
func (r *wrig) checkParity(t *testing.T) {
	t.Helper()
	length := int(r.items[0].Length)
	pl := layout(r.profile, r.n, length/S)
	for c := range r.items {
		for row := range length / (r.d * S) {
			p, q := make([]byte, S), make([]byte, S)
			for j := range r.d {
				var mul [256]byte
				for v := range 256 {
					mul[v] = gfMulSlow(gfPowSlow(j), byte(v))
				}
				at := c*length + (row*r.d+j)*S
				for i, v := range r.model[at : at+S] {
					p[i] ^= v
					q[i] ^= mul[v]
				}
			}
			e := pl[row*r.d]
			if got := r.readDev(t, c, e.p, uint64(row), S); !bytes.Equal(got, p) {
				t.Fatalf("chunk %d row %d: P on stripe %d differs at %d", c, row, e.p, firstDiff(got, p))
			}
			if e.q < 0 {
				continue
			}
			if got := r.readDev(t, c, e.q, uint64(row), S); !bytes.Equal(got, q) {
				t.Fatalf("chunk %d row %d: Q on stripe %d differs at %d", c, row, e.q, firstDiff(got, q))
			}
		}
	}
}

// checkDegraded reads everything back with every allowed set of devices
// removed (one for RAID5, up to two for RAID6).
func (r *wrig) checkDegraded(t *testing.T) {
	t.Helper()
	tol := 1
	if r.profile == "raid6" {
		tol = 2
	}
	got := make([]byte, len(r.model))
	for _, drop := range subsets(r.n, tol) {
		if len(drop) == 0 {
			continue
		}
		clear(got)
		if err := chunk.NewReader(r.m, r.devices(drop...)).ReadLogical(got, r.base, nil); err != nil {
			t.Fatalf("read without %v: %v", drop, err)
		}
		if i := firstDiff(got, r.model); i >= 0 {
			t.Fatalf("read without %v differs at offset %d", drop, i)
		}
	}
}

// TestWriterRandom writes random ranges of random lengths to every
// geometry and checks read-back, every copy, parity and degraded reads.
func TestWriterRandom(t *testing.T) {
	rng := newRand(t)
	rounds, perRound := 4, 25
	if testing.Short() {
		rounds = 2
	}
	for _, g := range testGeometries() {
		t.Run(fmt.Sprintf("%s-%d", g.profile, g.n), func(t *testing.T) {
			r := newWrig(t, g.profile, g.n, 3)
			w := chunk.NewWriter(r.m, r.devices())
			for range rounds {
				for range perRound {
					off, b := r.randomWrite(rng)
					r.write(t, w, off, b)
				}
				r.checkAll(t)
			}
		})
	}
}

// TestWriterFullRowNoReads checks that whole-row RAID5/6 writes read
// nothing, and that a partial write does read the other columns back.
func TestWriterFullRowNoReads(t *testing.T) {
	rng := newRand(t)
	for _, g := range []struct {
		profile string
		n       int
	}{{"raid5", 3}, {"raid5", 5}, {"raid6", 4}, {"raid6", 6}} {
		t.Run(fmt.Sprintf("%s-%d", g.profile, g.n), func(t *testing.T) {
			r := newWrig(t, g.profile, g.n, 3)
			faulty := map[disk.DevID]*blockdev.Faulty{}
			devs := map[disk.DevID]blockdev.Device{}
			for id, m := range r.mems {
				faulty[id] = blockdev.NewFaulty(m)
				devs[id] = faulty[id]
			}
			reads := func() int {
				total := 0
				for _, f := range faulty {
					total += f.Count(blockdev.OpRead)
				}
				return total
			}
			w := chunk.NewWriter(r.m, devs)
			rowLen := r.d * S
			b := make([]byte, 4*rowLen) // crosses into the second chunk
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			r.write(t, w, 1*rowLen, b)
			if n := reads(); n != 0 {
				t.Fatalf("full-row write made %d reads", n)
			}
			r.write(t, w, rowLen+S/2, b[:4096])
			if n := reads(); n != r.d-1 {
				t.Fatalf("one-column write made %d reads, want %d", n, r.d-1)
			}
			r.checkAll(t)
		})
	}
}

// TestWriterMissingDevice checks that a write needing an absent device fails
// with ErrDeviceMissing before writing anything, and that a RAID5/6 write
// needs every device of its row even when its own column is present.
func TestWriterMissingDevice(t *testing.T) {
	rng := newRand(t)
	for _, g := range testGeometries() {
		t.Run(fmt.Sprintf("%s-%d", g.profile, g.n), func(t *testing.T) {
			r := newWrig(t, g.profile, g.n, 2)
			full := chunk.NewWriter(r.m, r.devices())
			for range 10 {
				off, b := r.randomWrite(rng)
				r.write(t, full, off, b)
			}
			drop := disk.DevID(g.n) // the last device: holds the last stripe
			if g.profile == "dup" {
				drop = 1
			}
			w := chunk.NewWriter(r.m, r.devices(drop))
			b := make([]byte, len(r.model))
			for i := range b {
				b[i] = ^r.model[i]
			}
			if err := w.WriteLogical(b, r.base); !errors.Is(err, chunk.ErrDeviceMissing) {
				t.Fatalf("write without devid %d: %v", drop, err)
			}
			if g.profile == "raid5" || g.profile == "raid6" {
				// Row 0's column 0 is on stripe 0 (devid 1); the row still
				// needs the dropped device for a column or parity.
				if err := w.WriteLogical(b[:4096], r.base); !errors.Is(err, chunk.ErrDeviceMissing) {
					t.Fatalf("degraded RAID5/6 write allowed: %v", err)
				}
			}
			r.checkAll(t) // nothing was written
		})
	}
}

// TestWriterUnmapped checks that a range leaving the mapped space fails with
// ErrNotMapped and writes nothing.
func TestWriterUnmapped(t *testing.T) {
	r := newWrig(t, "raid6", 4, 2)
	w := chunk.NewWriter(r.m, r.devices())
	b := bytes.Repeat([]byte{0xee}, 3*S)
	end := r.base + disk.LogicalAddr(len(r.model))
	for _, l := range []disk.LogicalAddr{end - S, end, r.base - S} {
		err := w.WriteLogical(b, l)
		if !errors.Is(err, chunk.ErrNotMapped) || !errors.Is(err, disk.ErrCorrupt) {
			t.Fatalf("write at %d: %v", l, err)
		}
	}
	if err := w.WriteLogical(make([]byte, 2), ^disk.LogicalAddr(0)); !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("wrapping write: %v", err)
	}
	r.checkAll(t)
}

// TestWriterIOError checks that a device write error is returned, naming
// the device, and wraps the device's error.
func TestWriterIOError(t *testing.T) {
	for _, g := range []struct {
		profile string
		n       int
	}{{"raid1", 2}, {"raid6", 4}} {
		profile := g.profile
		r := newWrig(t, profile, g.n, 2)
		devs := r.devices()
		f := blockdev.NewFaulty(r.mems[2])
		f.FailAt(blockdev.OpWrite, 1, true)
		devs[2] = f
		err := chunk.NewWriter(r.m, devs).WriteLogical(make([]byte, len(r.model)), r.base)
		if !errors.Is(err, blockdev.ErrInjected) || !bytes.Contains([]byte(err.Error()), []byte("devid 2")) {
			t.Fatalf("%s: %v", profile, err)
		}
		rf := blockdev.NewFaulty(r.mems[1])
		rf.FailAt(blockdev.OpRead, 1, true)
		devs = r.devices()
		devs[1] = rf
		err = chunk.NewWriter(r.m, devs).WriteLogical(make([]byte, 100), r.base+S)
		if profile == "raid6" && !errors.Is(err, blockdev.ErrInjected) {
			t.Fatalf("%s: read-back failure not reported: %v", profile, err)
		}
	}
}

// TestWriterSync checks that Sync reaches every device and reports a
// failing one.
func TestWriterSync(t *testing.T) {
	r := newWrig(t, "raid1c3", 3, 1)
	w := chunk.NewWriter(r.m, r.devices())
	r.write(t, w, 100, []byte("hello"))
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	for id, m := range r.mems {
		if m.Syncs() != 1 || m.Unsynced() != 0 {
			t.Fatalf("devid %d: %d syncs, %d unsynced writes", id, m.Syncs(), m.Unsynced())
		}
	}
	devs := r.devices()
	f := blockdev.NewFaulty(r.mems[3])
	f.FailAt(blockdev.OpSync, 1, false)
	devs[3] = f
	if err := chunk.NewWriter(r.m, devs).Sync(); !errors.Is(err, blockdev.ErrInjected) {
		t.Fatalf("sync failure not reported: %v", err)
	}
	if r.mems[1].Syncs() != 2 {
		t.Fatal("a failing device stopped the others' sync")
	}
}

// TestWriterConcurrentColumns writes every column of the same RAID6 rows
// from different goroutines, in small pieces: the serialised
// read-modify-write must leave the parity of the final contents.
func TestWriterConcurrentColumns(t *testing.T) {
	rng := newRand(t)
	r := newWrig(t, "raid6", 6, 2)
	w := chunk.NewWriter(r.m, r.devices())
	for i := range r.model {
		r.model[i] = byte(rng.Uint32())
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(r.model)/S)
	for e := range len(r.model) / S {
		wg.Go(func() {
			for off := e * S; off < (e+1)*S; off += 8192 {
				if err := w.WriteLogical(r.model[off:off+8192], r.base+disk.LogicalAddr(off)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r.checkAll(t)
}

// nullDev discards writes and reads zeros, so benchmarks measure the
// Writer alone (a Mem logs and copies every write).
type nullDev struct{ size int64 }

func (d nullDev) ReadAt(p []byte, _ int64) (int, error)  { clear(p); return len(p), nil }
func (d nullDev) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
func (d nullDev) Size() int64                            { return d.size }
func (d nullDev) Sync() error                            { return nil }
func (d nullDev) Close() error                           { return nil }

// BenchmarkWriteFullStripesRAID6 writes a whole 6-device RAID6 chunk in
// one call: full rows, so no read-back; the Writer must not allocate.
func BenchmarkWriteFullStripesRAID6(b *testing.B) {
	r := newWrig(b, "raid6", 6, 8)
	devs := map[disk.DevID]blockdev.Device{}
	for id, m := range r.mems {
		devs[id] = nullDev{m.Size()}
	}
	w := chunk.NewWriter(r.m, devs)
	buf := make([]byte, r.items[0].Length)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteLogical(buf, r.base); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWritePartialRAID6 writes single 4 KiB blocks into a 6-device
// RAID6 chunk: each needs the other three columns read back.
func BenchmarkWritePartialRAID6(b *testing.B) {
	r := newWrig(b, "raid6", 6, 8)
	w := chunk.NewWriter(r.m, r.devices())
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		off := (i * 37 % (int(r.items[0].Length) / 4096)) * 4096
		if err := w.WriteLogical(buf, r.base+disk.LogicalAddr(off)); err != nil {
			b.Fatal(err)
		}
		if i++; i%256 == 0 {
			if err := w.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
