package btrfs

import (
	"bytes"
	"flag"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

var extentSeed = flag.Int64("extent-seed", 0, "replay TestExtentMapModel with this seed")

// extModel is a file as items over fake disk extents, next to the bytes
// it must read as.
type extModel struct {
	t      *testing.T
	rng    *rand.Rand
	holes  bool // explicit hole items (no NO_HOLES)
	disks  map[disk.LogicalAddr][]byte
	next   disk.LogicalAddr
	items  []extent
	want   []byte
	refs   map[dataRef]int64
	nbytes int64
}

const modelSector = 8

func (m *extModel) overlapping(a, b uint64) []extent {
	var out []extent
	for _, e := range m.items {
		if e.start < b && e.start+e.length > a {
			out = append(out, e)
		}
	}
	return out
}

// replace applies del/add the way wctx.apply does.
func (m *extModel) replace(del, add []extent) {
	for r, n := range refDeltas(del, add) {
		m.refs[r] += n
		if m.refs[r] == 0 {
			delete(m.refs, r)
		}
	}
	m.nbytes += nbytesDelta(del, add)
	m.items = mergeSorted(without(m.items, del), add)
}

func (m *extModel) size() uint64 { return uint64(len(m.want)) }

// grow extends the model to n bytes, with hole items for the gap.
func (m *extModel) grow(n uint64) {
	if n <= m.size() {
		return
	}
	if m.holes {
		m.replace(nil, holeItems(m.overlapping(m.size(), n), m.size(), n, 1))
	}
	m.want = append(m.want, make([]byte, n-m.size())...)
}

func (m *extModel) write(a, n uint64) {
	data := make([]byte, n)
	m.rng.Read(data)
	m.next += 1 << 20
	m.disks[m.next] = data
	m.grow(a)
	e := extent{start: a, length: n, fe: disk.FileExtentItem{Type: disk.FileExtentReg,
		DiskBytenr: m.next, DiskNumBytes: n, NumBytes: n, RAMBytes: n}}
	del, keep := cutRange(m.overlapping(a, a+n), a, a+n)
	m.replace(del, mergeSorted(keep, []extent{e}))
	m.grow(a + n)
	copy(m.want[a:], data)
}

func (m *extModel) punch(a, n uint64) {
	b := min(a+n, m.size())
	if a >= b {
		return
	}
	del, keep := cutRange(m.overlapping(a, b), a, b)
	if m.holes {
		keep = mergeSorted(keep, []extent{holeExtent(a, b-a, 1)})
	}
	m.replace(del, keep)
	clear(m.want[a:b])
}

func (m *extModel) truncate(size uint64) {
	if size >= m.size() {
		m.grow(size)
		return
	}
	del, keep := cutRange(m.overlapping(size, math.MaxUint64), size, math.MaxUint64)
	m.replace(del, keep)
	m.want = m.want[:size]
}

func (m *extModel) clone(src, dst, n uint64) {
	if src+n > m.size() || (src < dst+n && dst < src+n) {
		return
	}
	items := shiftExtents(m.overlapping(src, src+n), src, n, dst)
	m.grow(dst)
	del, keep := cutRange(m.overlapping(dst, dst+n), dst, dst+n)
	add := mergeSorted(keep, items)
	if m.holes {
		add = mergeSorted(add, holeItems(add, dst, dst+n, 1))
	}
	m.replace(del, add)
	m.grow(dst + n)
	copy(m.want[dst:dst+n], append([]byte(nil), m.want[src:src+n]...))
}

func (m *extModel) prealloc(a, n uint64) {
	exts := m.overlapping(a, a+n)
	var holes, solid []extent
	for _, e := range exts {
		if e.fe.IsHole() {
			holes = append(holes, e)
		} else {
			solid = append(solid, e)
		}
	}
	del, add := cutRange(holes, a, a+n)
	for _, g := range holeItems(solid, a, a+n, 0) {
		m.next += 1 << 20
		m.disks[m.next] = bytes.Repeat([]byte{0xee}, int(g.length)) // unwritten garbage
		add = append(add, extent{start: g.start, length: g.length, fe: disk.FileExtentItem{
			Type: disk.FileExtentPrealloc, DiskBytenr: m.next, DiskNumBytes: g.length, NumBytes: g.length, RAMBytes: g.length}})
	}
	m.replace(del, sortExtents(add))
}

// verify reads the file back from the items and checks the bookkeeping.
func (m *extModel) verify(step int, op string) {
	t := m.t
	got := make([]byte, m.size())
	var end uint64
	refs := map[dataRef]int64{}
	var nb int64
	for i, e := range m.items {
		if e.start < end || e.length == 0 {
			t.Fatalf("step %d (%s): item %d at %d overlaps or is empty (prev end %d)", step, op, i, e.start, end)
		}
		if m.holes && e.start != end && e.start < m.size() {
			t.Fatalf("step %d (%s): gap [%d, %d) without a hole item", step, op, end, e.start)
		}
		end = e.start + e.length
		if r, ok := refOf(&e); ok {
			refs[r]++
		}
		nb += int64(nbytesOf(&e))
		if e.fe.NumBytes != e.length || e.fe.Offset+e.fe.NumBytes > e.fe.RAMBytes {
			t.Fatalf("step %d (%s): item %+v inconsistent", step, op, e)
		}
		if e.fe.Type != disk.FileExtentReg || e.fe.DiskBytenr == 0 || e.start >= m.size() {
			continue
		}
		src := m.disks[e.fe.DiskBytenr][e.fe.Offset : e.fe.Offset+e.fe.NumBytes]
		copy(got[e.start:min(end, m.size())], src)
	}
	if m.holes && end < m.size() {
		t.Fatalf("step %d (%s): items end at %d before size %d", step, op, end, m.size())
	}
	if !bytes.Equal(got, m.want) {
		t.Fatalf("step %d (%s): file content differs from the model", step, op)
	}
	if nb != m.nbytes {
		t.Fatalf("step %d (%s): nbytes %d by deltas, %d by items", step, op, m.nbytes, nb)
	}
	if len(refs) != len(m.refs) {
		t.Fatalf("step %d (%s): %d refs by deltas, %d by items", step, op, len(m.refs), len(refs))
	}
	for r, n := range refs {
		if m.refs[r] != n {
			t.Fatalf("step %d (%s): ref %+v: %d by deltas, %d by items", step, op, r, m.refs[r], n)
		}
	}
}

// TestExtentMapModel drives the pure extent-map logic with random
// writes, punches, truncates, clones and preallocations and checks every
// state against a byte array. Replay with -extent-seed.
func TestExtentMapModel(t *testing.T) {
	seed := *extentSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay: go test -run TestExtentMapModel -extent-seed %d)", seed, seed)
	for _, holes := range []bool{false, true} {
		rng := rand.New(rand.NewSource(seed))
		m := &extModel{t: t, rng: rng, holes: holes, disks: map[disk.LogicalAddr][]byte{}, refs: map[dataRef]int64{}}
		off := func() uint64 { return uint64(rng.Intn(64)) * modelSector }
		ln := func() uint64 { return uint64(1+rng.Intn(16)) * modelSector }
		for step := range 3000 {
			var op string
			switch r := rng.Intn(10); {
			case r < 4:
				op = "write"
				m.write(off(), ln())
			case r < 6:
				op = "punch"
				m.punch(off(), ln())
			case r < 7:
				op = "truncate"
				m.truncate(off())
			case r < 9:
				op = "clone"
				m.clone(off(), off(), ln())
			default:
				op = "prealloc"
				m.prealloc(off(), ln())
			}
			m.verify(step, op)
		}
	}
}

func TestCutRangeSplitsKeepRefs(t *testing.T) {
	e := extent{start: 4096, length: 3 * 4096, fe: disk.FileExtentItem{Type: disk.FileExtentReg,
		DiskBytenr: 1 << 20, DiskNumBytes: 3 * 4096, NumBytes: 3 * 4096, RAMBytes: 3 * 4096}}
	del, keep := cutRange([]extent{e}, 2*4096, 3*4096)
	if len(del) != 1 || len(keep) != 2 {
		t.Fatalf("del %d keep %d", len(del), len(keep))
	}
	if keep[1].start != 3*4096 || keep[1].fe.Offset != 2*4096 || keep[1].fe.NumBytes != 4096 {
		t.Fatalf("right remnant %+v", keep[1])
	}
	d := refDeltas(del, keep)
	r, _ := refOf(&e)
	if len(d) != 1 || d[r] != 1 {
		t.Fatalf("deltas %v, want +1 on %+v", d, r)
	}
	if nbytesDelta(del, keep) != -4096 {
		t.Fatalf("nbytes delta %d", nbytesDelta(del, keep))
	}
}

func TestHoleItems(t *testing.T) {
	exts := []extent{{start: 8, length: 8}, {start: 32, length: 8}}
	got := holeItems(exts, 0, 48, 7)
	want := [][2]uint64{{0, 8}, {16, 16}, {40, 8}}
	if len(got) != len(want) {
		t.Fatalf("got %d holes", len(got))
	}
	for i, w := range want {
		if got[i].start != w[0] || got[i].length != w[1] || !got[i].fe.IsHole() || got[i].fe.RAMBytes != w[1] {
			t.Fatalf("hole %d = %+v, want %v", i, got[i], w)
		}
	}
}

func TestInlineExtentChoice(t *testing.T) {
	pol := dataPolicy{ss: 4096, ct: disk.CsumCRC32C}
	if _, ok, _ := inlineExtent(make([]byte, 2049), pol, 2048, 1, nil); ok {
		t.Fatal("2049 bytes inlined with max_inline 2048")
	}
	e, ok, _ := inlineExtent(make([]byte, 2048), pol, 2048, 1, nil)
	if !ok || e.fe.RAMBytes != 2048 || len(e.fe.InlineData) != 2048 || e.fe.Compression != disk.CompressNone {
		t.Fatalf("2048 bytes: ok %v %+v", ok, e.fe)
	}
	pol.comp = 3
	e, ok, _ = inlineExtent(make([]byte, 3000), pol, 2048, 1, nil)
	if !ok || e.fe.Compression != disk.CompressZstd || e.fe.RAMBytes != 3000 || len(e.fe.InlineData) >= 3000 {
		t.Fatalf("compressible 3000 bytes: ok %v %v", ok, e.fe.String())
	}
	if _, ok, _ := inlineExtent(nil, pol, 2048, 1, nil); ok {
		t.Fatal("empty content inlined")
	}
}

// FuzzExtentMap drives the extent-map model with operations decoded from
// the input, three bytes each: kind, offset and length in sectors.
func FuzzExtentMap(f *testing.F) {
	f.Add([]byte{0, 0, 4, 1, 1, 1, 3, 2, 1, 2, 8, 0})
	f.Add([]byte{0, 10, 20, 4, 0, 5, 3, 12, 2, 0, 3, 3, 1, 0, 40})
	f.Fuzz(func(t *testing.T, ops []byte) {
		for _, holes := range []bool{false, true} {
			m := &extModel{t: t, rng: rand.New(rand.NewSource(1)), holes: holes,
				disks: map[disk.LogicalAddr][]byte{}, refs: map[dataRef]int64{}}
			for i := 0; i+3 <= len(ops) && i < 300; i += 3 {
				off, n := uint64(ops[i+1]%64)*modelSector, uint64(1+ops[i+2]%16)*modelSector
				var op string
				switch ops[i] % 5 {
				case 0:
					op = "write"
					m.write(off, n)
				case 1:
					op = "punch"
					m.punch(off, n)
				case 2:
					op = "truncate"
					m.truncate(off)
				case 3:
					op = "clone"
					m.clone(off, uint64(ops[i+2]%64)*modelSector, n)
				default:
					op = "prealloc"
					m.prealloc(off, n)
				}
				m.verify(i/3, op)
			}
		}
	})
}
