package chunk_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// geometries lists every profile with the device counts tested.
var geometries = []struct {
	profile string
	n       int
	tol     int // device losses survived
}{
	{"single", 1, 0}, {"dup", 2, 0}, {"raid0", 3, 0}, {"raid1", 2, 1}, {"raid1c3", 3, 2}, {"raid1c4", 4, 3},
	{"raid10", 4, 1}, {"raid10", 6, 1}, {"raid5", 2, 1}, {"raid5", 3, 1}, {"raid5", 5, 1},
	{"raid6", 3, 2}, {"raid6", 4, 2}, {"raid6", 6, 2},
}

// testGeometries is geometries, cut to one device count per profile under
// -short.
func testGeometries() []struct {
	profile string
	n       int
	tol     int
} {
	if !testing.Short() {
		return geometries
	}
	out := geometries[:0:0]
	seen := map[string]bool{}
	for _, g := range geometries {
		if !seen[g.profile] {
			seen[g.profile] = true
			out = append(out, g)
		}
	}
	return out
}

// readCheck reads [off, off+n) of the chunk and compares with the pattern.
func readCheck(t *testing.T, r *chunk.Reader, s *synth, off, n int, verify chunk.VerifyFunc) []chunk.Piece {
	t.Helper()
	var pieces []chunk.Piece
	got := make([]byte, n)
	l := s.start + disk.LogicalAddr(off)
	if err := r.ReadLogicalTrace(got, l, verify, func(p chunk.Piece) { pieces = append(pieces, p) }); err != nil {
		t.Fatalf("read %d+%d: %v", off, n, err)
	}
	if !bytes.Equal(got, pattern(l, n)) {
		t.Fatalf("read %d+%d: wrong data", off, n)
	}
	return pieces
}

func TestReaderHealthy(t *testing.T) {
	rng := newRand(t)
	for _, g := range testGeometries() {
		t.Run(fmt.Sprintf("%s-%d", g.profile, g.n), func(t *testing.T) {
			s := newSynth(t, g.profile, g.n, 4)
			r := s.reader()
			total := int(s.item.Length)
			pieces := readCheck(t, r, s, 0, total, patternVerify)
			for _, p := range pieces {
				if p.Mirror != 1 || p.Rebuilt || len(p.Failed) != 0 {
					t.Fatalf("healthy read used %+v", p)
				}
			}
			for range 50 {
				off := rng.IntN(total)
				n := 1 + rng.IntN(min(total-off, 3*S))
				readCheck(t, r, s, off, n, nil)
			}
		})
	}
}

// TestReaderMissingDevices drops every allowed number of devices (each
// combination for small sets) and reads everything back, with and without
// verification; one loss too many must fail with ErrDeviceMissing.
func TestReaderMissingDevices(t *testing.T) {
	for _, g := range testGeometries() {
		if g.profile == "dup" {
			continue // one device: losing it loses everything
		}
		t.Run(fmt.Sprintf("%s-%d", g.profile, g.n), func(t *testing.T) {
			s := cachedSynth(t, g.profile, g.n, 3)
			for _, drop := range subsets(g.n, g.tol) {
				if g.profile == "raid10" && !raid10Survives(drop) {
					continue
				}
				r := s.reader(drop...)
				for _, v := range []chunk.VerifyFunc{nil, patternVerify} {
					readCheck(t, r, s, 0, int(s.item.Length), v)
				}
			}
			over := make([]disk.DevID, g.tol+1)
			for i := range over {
				over[i] = disk.DevID(i + 1)
			}
			if g.profile == "raid10" {
				over = []disk.DevID{1, 2}
			}
			err := s.reader(over...).ReadLogical(make([]byte, s.item.Length), s.start, nil)
			var re *chunk.ReadError
			if !errors.As(err, &re) || !errors.Is(err, chunk.ErrDeviceMissing) {
				t.Fatalf("losing %v: %v", over, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("read logical %d", re.Logical)) || !strings.Contains(err.Error(), "devid") {
				t.Fatalf("error does not name the address and devices: %v", err)
			}
		})
	}
}

// subsets returns every set of at most max devids out of 1..n.
func subsets(n, max int) [][]disk.DevID {
	var out [][]disk.DevID
	for mask := range 1 << n {
		var s []disk.DevID
		for k := range n {
			if mask&(1<<k) != 0 {
				s = append(s, disk.DevID(k+1))
			}
		}
		if len(s) <= max {
			out = append(out, s)
		}
	}
	return out
}

// raid10Survives reports whether no mirror pair (stripes 2i, 2i+1, devids
// 2i+1, 2i+2) lost both members.
func raid10Survives(drop []disk.DevID) bool {
	lost := map[disk.DevID]bool{}
	for _, id := range drop {
		lost[id] = true
	}
	for id := disk.DevID(1); id < 16; id += 2 {
		if lost[id] && lost[id+1] {
			return false
		}
	}
	return true
}

// TestReaderCorruptStripes garbles up to tol whole stripes (readable, wrong
// bytes) and checks that verification steers the reader to good copies or
// to a parity rebuild, including RAID6 with two silently bad columns.
func TestReaderCorruptStripes(t *testing.T) {
	for _, g := range testGeometries() {
		if g.tol == 0 {
			continue
		}
		for _, bad := range subsets(g.n, g.tol) {
			if len(bad) == 0 || (g.profile == "raid10" && !raid10Survives(bad)) {
				continue
			}
			t.Run(fmt.Sprintf("%s-%d-%v", g.profile, g.n, bad), func(t *testing.T) {
				s := cachedSynth(t, g.profile, g.n, 3)
				for _, id := range bad {
					s.garble(t, int(id-1))
				}
				rebuilt, maxMirror := false, 0
				for _, p := range readCheck(t, s.reader(), s, 0, int(s.item.Length), patternVerify) {
					rebuilt = rebuilt || p.Rebuilt
					maxMirror = max(maxMirror, p.Mirror)
					if p.Mirror != 1 && len(p.Failed) == 0 {
						t.Fatalf("piece %+v: mirror %d without a failure", p, p.Mirror)
					}
				}
				if g.profile == "raid5" || g.profile == "raid6" {
					if !rebuilt {
						t.Fatal("no piece was rebuilt from parity")
					}
				}
				// Stripes 0 and 1 hold row 0's two data columns: only the
				// two-column search (mirror 4 and up) can rebuild them.
				if g.profile == "raid6" && g.n == 4 && len(bad) == 2 && bad[0] == 1 && bad[1] == 2 && maxMirror < 4 {
					t.Fatalf("two bad data columns rebuilt with mirror %d", maxMirror)
				}
			})
		}
	}
}

// TestReaderRAID6MissingAndCorrupt loses one device and garbles another.
func TestReaderRAID6MissingAndCorrupt(t *testing.T) {
	for _, n := range []int{4, 5} {
		for miss := 1; miss <= n; miss++ {
			for bad := 1; bad <= n; bad++ {
				if bad == miss {
					continue
				}
				s := cachedSynth(t, "raid6", n, 3)
				s.garble(t, bad-1)
				readCheck(t, s.reader(disk.DevID(miss)), s, 0, int(s.item.Length), patternVerify)
			}
		}
	}
	// Three losses are too many; the error says why.
	s := newSynth(t, "raid6", 5, 2)
	s.garble(t, 0)
	err := s.reader(2, 3).ReadLogical(make([]byte, s.item.Length), s.start, patternVerify)
	if !errors.Is(err, disk.ErrCorrupt) || !errors.Is(err, chunk.ErrDeviceMissing) {
		t.Fatalf("three losses: %v", err)
	}
}

// TestReaderSectorMerge makes every sector bad on one of two mirrors, never
// both: only a sector-by-sector retry can read the range.
func TestReaderSectorMerge(t *testing.T) {
	s := newSynth(t, "raid1", 2, 4)
	for sec := range 4 * S / 4096 {
		st := s.item.Stripes[sec%2]
		s.devs[st.DevID].WriteAt(make([]byte, 4096), int64(st.Offset)+int64(sec*4096))
	}
	pieces := readCheck(t, s.reader(), s, 0, 4*S, patternVerify)
	if len(pieces) != 4*S/4096 {
		t.Fatalf("%d pieces, want one per sector", len(pieces))
	}
	for i, p := range pieces {
		if p.Mirror != 1+(i+1)%2 {
			t.Fatalf("sector %d from mirror %d", i, p.Mirror)
		}
	}
	// ReadBlock judges the block whole and cannot merge: a 16K block with
	// a bad sector on each mirror fails, and the error lists both copies.
	blk := make([]byte, 16384)
	err := s.reader().ReadBlock(blk, s.start, func(b []byte) bool { return patternVerify(s.start, b) })
	if !errors.Is(err, chunk.ErrVerify) || strings.Count(err.Error(), "devid") < 2 {
		t.Fatalf("ReadBlock over two half-bad mirrors: %v", err)
	}
}

func TestReadBlock(t *testing.T) {
	s := newSynth(t, "raid0", 2, 2)
	r := s.reader()
	blk := make([]byte, 16384)
	l := s.start + S + 16384
	if err := r.ReadBlock(blk, l, func(b []byte) bool { return patternVerify(l, b) }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(blk, pattern(l, len(blk))) {
		t.Fatal("ReadBlock data")
	}
	err := r.ReadBlock(blk, s.start+S-4096, nil)
	if !errors.Is(err, disk.ErrCorrupt) || !strings.Contains(err.Error(), "crosses a stripe") {
		t.Fatalf("crossing block: %v", err)
	}
	if err := r.ReadBlock(blk, 4096, nil); !errors.Is(err, chunk.ErrNotMapped) {
		t.Fatalf("unmapped block: %v", err)
	}
	if err := r.ReadLogical(blk, s.start+disk.LogicalAddr(s.item.Length)-4096, nil); !errors.Is(err, chunk.ErrNotMapped) {
		t.Fatalf("read past the chunk end: %v", err)
	}
}

// TestReaderDeviceErrors covers I/O errors and truncated devices.
func TestReaderDeviceErrors(t *testing.T) {
	s := newSynth(t, "raid1", 2, 2)
	f := blockdev.NewFaulty(s.devs[1])
	f.FailAt(blockdev.OpRead, 1, true)
	devs := map[disk.DevID]blockdev.Device{1: f, 2: s.devs[2]}
	r := chunk.NewReader(s.m, devs)
	got := make([]byte, 2*S)
	var pieces []chunk.Piece
	if err := r.ReadLogicalTrace(got, s.start, nil, func(p chunk.Piece) { pieces = append(pieces, p) }); err != nil {
		t.Fatal(err)
	}
	if len(pieces) != 1 || pieces[0].Mirror != 2 || !errors.Is(pieces[0].Failed[0].Err, blockdev.ErrInjected) {
		t.Fatalf("pieces %+v", pieces)
	}
	// A device too short for its stripe is a truncated image: corrupt.
	short := blockdev.NewMem(int64(s.offs[1]) + S)
	buf := make([]byte, S)
	s.devs[2].ReadAt(buf, int64(s.offs[1]))
	short.WriteAt(buf, int64(s.offs[1]))
	r = chunk.NewReader(s.m, map[disk.DevID]blockdev.Device{1: f, 2: short})
	err := r.ReadLogical(got, s.start, nil)
	if !errors.Is(err, disk.ErrCorrupt) || !errors.Is(err, blockdev.ErrInjected) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated: %v", err)
	}
	if err := r.ReadLogical(got[:S], s.start, nil); err != nil {
		t.Fatalf("the part that exists: %v", err)
	}
}

func TestParity(t *testing.T) {
	rng := newRand(t)
	for _, d := range []int{1, 2, 5, 17} {
		n := 1 + rng.IntN(100)
		data := make([][]byte, d)
		wantP, wantQ := make([]byte, n), make([]byte, n)
		for j := range data {
			data[j] = make([]byte, n)
			for i := range data[j] {
				data[j][i] = byte(rng.Uint32())
				wantP[i] ^= data[j][i]
				wantQ[i] ^= gfMulSlow(gfPowSlow(j), data[j][i])
			}
		}
		p, q := make([]byte, n), make([]byte, n)
		chunk.Parity(p, q, data)
		if !bytes.Equal(p, wantP) || !bytes.Equal(q, wantQ) {
			t.Fatalf("parity of %d columns", d)
		}
	}
}

// TestReaderParitySectors damages more columns of one row than parity
// covers, but each at a different sector: only a sector-by-sector rebuild
// reads the row.
func TestReaderParitySectors(t *testing.T) {
	for _, g := range []struct {
		profile string
		n, bad  int
	}{{"raid5", 3, 2}, {"raid5", 5, 4}, {"raid6", 4, 4}, {"raid6", 6, 6}} {
		s := cachedSynth(t, g.profile, g.n, 2)
		// Row 0 occupies every stripe's first element; damage sector k of
		// stripe k, for the first bad stripes (data and parity alike).
		for k := range g.bad {
			st := s.item.Stripes[k]
			s.devs[st.DevID].WriteAt(bytes.Repeat([]byte{0xee}, 4096), int64(st.Offset)+int64(k*4096))
		}
		d := g.n - 1
		if g.profile == "raid6" {
			d = g.n - 2
		}
		pieces := readCheck(t, s.reader(), s, 0, d*S, patternVerify)
		if len(pieces) <= d {
			t.Fatalf("%s/%d: %d pieces: no sector-level retry", g.profile, g.n, len(pieces))
		}
	}
}

// TestReaderParityBeyondRepair damages the same sector offset of several
// columns of one row (what a random choice of sectors to damage in a
// kernel-made RAID5 image once did): when that exceeds what parity covers,
// the sector must fail with a ReadError naming it, never return wrong
// bytes, while the rest of the row still reads; within RAID6's reach it is
// rebuilt.
func TestReaderParityBeyondRepair(t *testing.T) {
	for _, g := range []struct {
		profile string
		n       int
		bad     []int // stripes damaged at the same offset of row 0
		ok      bool
	}{
		{"raid5", 3, []int{0, 1}, false},    // both data columns
		{"raid5", 3, []int{0, 2}, false},    // a data column and P
		{"raid5", 4, []int{1, 2}, false},    // two of three data columns
		{"raid6", 4, []int{0, 1}, true},     // both data columns, P and Q good
		{"raid6", 4, []int{0, 1, 2}, false}, // both data columns and P
		{"raid6", 5, []int{0, 2, 3}, false}, // two data columns and P
	} {
		t.Run(fmt.Sprintf("%s-%d-%v", g.profile, g.n, g.bad), func(t *testing.T) {
			s := cachedSynth(t, g.profile, g.n, 2)
			const sector = 3
			for _, k := range g.bad {
				st := s.item.Stripes[k]
				s.devs[st.DevID].WriteAt(bytes.Repeat([]byte{0x5a}, 4096), int64(st.Offset)+sector*4096)
			}
			d := len(s.item.Stripes) - 1
			if g.profile == "raid6" {
				d--
			}
			r := s.reader()
			if g.ok {
				readCheck(t, r, s, 0, d*S, patternVerify)
				return
			}
			// Row 0's column j is stripe j; the first damaged data column
			// holds the first sector that cannot be read.
			want := s.start + disk.LogicalAddr(g.bad[0]*S+sector*4096)
			got := make([]byte, d*S)
			err := r.ReadLogical(got, s.start, patternVerify)
			var re *chunk.ReadError
			if !errors.As(err, &re) || re.Logical != want || re.Length != 4096 ||
				!errors.Is(err, chunk.ErrVerify) || !errors.Is(err, disk.ErrCorrupt) {
				t.Fatalf("read of the row: %v, want a ReadError for sector %d", err, want)
			}
			if len(re.Attempts) < 2 || re.Attempts[0].Rebuild || !re.Attempts[len(re.Attempts)-1].Rebuild {
				t.Fatalf("attempts %v: want the column, then a rebuild", re.Attempts)
			}
			// Everything before the lost sector was read and is right.
			if off := int(want - s.start); !bytes.Equal(got[:off], pattern(s.start, off)) {
				t.Fatal("bytes before the lost sector are wrong")
			}
			readCheck(t, r, s, g.bad[0]*S, sector*4096, patternVerify)
			readCheck(t, r, s, g.bad[0]*S+(sector+1)*4096, S-(sector+1)*4096, patternVerify)
		})
	}
}
