package chunk_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// loc is a compact expected location: stripe index and offset within that
// stripe (physical = stripe offset + rel).
type loc struct {
	stripe int
	rel    uint64
}

// TestMappingTable checks hand-computed mappings. Stripe k sits at physical
// (k+1) GiB on devid 10+k, so physical = (k+1)<<30 + rel.
func TestMappingTable(t *testing.T) {
	const base = disk.LogicalAddr(1 << 40)
	cases := []struct {
		profile string
		n       int
		length  uint64
		off     uint64 // from chunk start
		wantLen uint64 // for a request of 1 MiB
		copies  []loc
		data    []loc // RAID5/6: every column of the row
		p, q    int   // RAID5/6 parity stripe (q -1 for RAID5)
	}{
		{"single", 1, 8 << 20, 5, 1 << 20, []loc{{0, 5}}, nil, -1, -1},
		{"single", 1, 8 << 20, 8<<20 - 100, 100, []loc{{0, 8<<20 - 100}}, nil, -1, -1},
		{"dup", 2, 8 << 20, 3 * S, 1 << 20, []loc{{0, 3 * S}, {1, 3 * S}}, nil, -1, -1},
		{"raid1", 2, 8 << 20, S + 7, 1 << 20, []loc{{0, S + 7}, {1, S + 7}}, nil, -1, -1},
		{"raid1c3", 3, 8 << 20, 9, 1 << 20, []loc{{0, 9}, {1, 9}, {2, 9}}, nil, -1, -1},
		{"raid1c4", 4, 8 << 20, 9, 1 << 20, []loc{{0, 9}, {1, 9}, {2, 9}, {3, 9}}, nil, -1, -1},
		// RAID0 on 3: element 0,1,2 on stripes 0,1,2 row 0; element 4 on stripe 1 row 1.
		{"raid0", 3, 3 * 4 * S, 0, S, []loc{{0, 0}}, nil, -1, -1},
		{"raid0", 3, 3 * 4 * S, 2*S + 100, S - 100, []loc{{2, 100}}, nil, -1, -1},
		{"raid0", 3, 3 * 4 * S, 4*S + S - 1, 1, []loc{{1, S + S - 1}}, nil, -1, -1},
		// RAID10 on 4 (two groups of two): element 0 -> stripes 0,1; element 1 -> 2,3;
		// element 2 -> 0,1 at row 1; element 5 -> 2,3 at row 2.
		{"raid10", 4, 2 * 4 * S, 0, S, []loc{{0, 0}, {1, 0}}, nil, -1, -1},
		{"raid10", 4, 2 * 4 * S, S + 1, S - 1, []loc{{2, 1}, {3, 1}}, nil, -1, -1},
		{"raid10", 4, 2 * 4 * S, 2 * S, S, []loc{{0, S}, {1, S}}, nil, -1, -1},
		{"raid10", 4, 2 * 4 * S, 5*S + 3, S - 3, []loc{{2, 2*S + 3}, {3, 2*S + 3}}, nil, -1, -1},
		// RAID10 on 6: three groups.
		{"raid10", 6, 3 * 2 * S, 4 * S, S, []loc{{2, S}, {3, S}}, nil, -1, -1},
		// RAID5 on 3 (d=2). Row 0: D0 s0, D1 s1, P s2. Row 1: D0 s1, D1 s2, P s0.
		// Row 2: D0 s2, D1 s0, P s1.
		{"raid5", 3, 2 * 3 * S, 0, S, []loc{{0, 0}}, []loc{{0, 0}, {1, 0}}, 2, -1},
		{"raid5", 3, 2 * 3 * S, S + 5, S - 5, []loc{{1, 5}}, []loc{{0, 5}, {1, 5}}, 2, -1},
		{"raid5", 3, 2 * 3 * S, 2 * S, S, []loc{{1, S}}, []loc{{1, S}, {2, S}}, 0, -1},
		{"raid5", 3, 2 * 3 * S, 3*S + 9, S - 9, []loc{{2, S + 9}}, []loc{{1, S + 9}, {2, S + 9}}, 0, -1},
		{"raid5", 3, 2 * 3 * S, 5 * S, S, []loc{{0, 2 * S}}, []loc{{2, 2 * S}, {0, 2 * S}}, 1, -1},
		// RAID6 on 4 (d=2). Row 0: D0 s0, D1 s1, P s2, Q s3. Row 1: D0 s1, D1 s2, P s3, Q s0.
		// Row 3: D0 s3, D1 s0, P s1, Q s2.
		{"raid6", 4, 2 * 4 * S, S, S, []loc{{1, 0}}, []loc{{0, 0}, {1, 0}}, 2, 3},
		{"raid6", 4, 2 * 4 * S, 2 * S, S, []loc{{1, S}}, []loc{{1, S}, {2, S}}, 3, 0},
		{"raid6", 4, 2 * 4 * S, 7*S + 1, S - 1, []loc{{0, 3*S + 1}}, []loc{{3, 3*S + 1}, {0, 3*S + 1}}, 1, 2},
		// RAID6 on 5 (d=3), row 1: D0 s1, D1 s2, D2 s3, P s4, Q s0.
		{"raid6", 5, 3 * 5 * S, 4 * S, S, []loc{{2, S}}, []loc{{1, S}, {2, S}, {3, S}}, 4, 0},
		// RAID5 on 2 (d=1): P mirrors the data.
		{"raid5", 2, 4 * S, S, S, []loc{{1, S}}, []loc{{1, S}}, 0, -1},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-%d-%d", tc.profile, tc.n, tc.off), func(t *testing.T) {
			var devs []disk.DevID
			var offs []disk.PhysicalAddr
			for k := range tc.n {
				devs = append(devs, disk.DevID(10+k))
				offs = append(offs, disk.PhysicalAddr(k+1)<<30)
			}
			m := chunk.NewMap(4096)
			if err := m.Add(base, mkChunk(tc.profile, tc.length, devs, offs)); err != nil {
				t.Fatal(err)
			}
			mp, err := m.Mirrors(base+disk.LogicalAddr(tc.off), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if mp.Length != tc.wantLen {
				t.Errorf("length %d, want %d", mp.Length, tc.wantLen)
			}
			toLocs := func(ls []chunk.Location) []loc {
				var out []loc
				for _, l := range ls {
					if l.DevID != disk.DevID(10+l.Stripe) {
						t.Errorf("stripe %d has devid %d", l.Stripe, l.DevID)
					}
					out = append(out, loc{l.Stripe, uint64(l.Physical) - uint64(l.Stripe+1)<<30})
				}
				return out
			}
			if got := toLocs(mp.Copies); !slices.Equal(got, tc.copies) {
				t.Errorf("copies %v, want %v", got, tc.copies)
			}
			if got := toLocs(mp.Data); !slices.Equal(got, tc.data) {
				t.Errorf("data columns %v, want %v", got, tc.data)
			}
			if mp.P.Stripe != tc.p || mp.Q.Stripe != tc.q {
				t.Errorf("P on %d Q on %d, want %d %d", mp.P.Stripe, mp.Q.Stripe, tc.p, tc.q)
			}
			if tc.p >= 0 && uint64(mp.P.Physical)-uint64(tc.p+1)<<30 != tc.data[0].rel {
				t.Errorf("P at physical %d, not level with the data", mp.P.Physical)
			}
		})
	}
}

// layout enumerates, row by row, where each stripe element of a chunk is
// stored: an independent restatement of the formulas by construction
// rather than division. It returns for each element its copies as
// (stripe, row) pairs and, for RAID5/6, its row's P and Q stripes.
type placement struct {
	copies []loc // rel is the row here
	p, q   int
}

func layout(profile string, n int, elements int) []placement {
	out := make([]placement, 0, elements)
	for row := 0; len(out) < elements; row++ {
		switch profile {
		case "single", "dup", "raid1", "raid1c3", "raid1c4":
			pl := placement{p: -1, q: -1}
			for k := range n {
				pl.copies = append(pl.copies, loc{k, uint64(row)})
			}
			out = append(out, pl)
		case "raid0":
			for k := range n {
				out = append(out, placement{copies: []loc{{k, uint64(row)}}, p: -1, q: -1})
			}
		case "raid10":
			for g := 0; g < n; g += 2 {
				out = append(out, placement{copies: []loc{{g, uint64(row)}, {g + 1, uint64(row)}}, p: -1, q: -1})
			}
		case "raid5", "raid6":
			par := 1
			if profile == "raid6" {
				par = 2
			}
			d := n - par
			// Walk the devices starting at the row's rotation point: d data
			// columns, then P, then Q.
			q := -1
			if par == 2 {
				q = (row + d + 1) % n
			}
			for j := range d {
				out = append(out, placement{copies: []loc{{(row + j) % n, uint64(row)}}, p: (row + d) % n, q: q})
			}
		}
	}
	return out[:elements]
}

// TestMappingModel compares every element of many geometries with layout.
func TestMappingModel(t *testing.T) {
	counts := map[string][]int{
		"single": {1}, "dup": {2}, "raid1": {2}, "raid1c3": {3}, "raid1c4": {4}, "raid0": {1, 2, 3, 5},
		"raid10": {2, 4, 6, 8}, "raid5": {2, 3, 4, 7}, "raid6": {3, 4, 5, 9},
	}
	for profile, ns := range counts {
		for _, n := range ns {
			c := mkChunk(profile, 0, nil, nil)
			var devs []disk.DevID
			var offs []disk.PhysicalAddr
			for k := range n {
				devs = append(devs, disk.DevID(k+1))
				offs = append(offs, disk.PhysicalAddr(1<<20+k*7*S))
			}
			d := chunk.StripeSizeOnDevice(mkChunk(profile, 1<<20, devs, offs))
			rows := 11
			c = mkChunk(profile, uint64(rows)*(1<<20/d)*S, devs, offs) // rows full rows
			m := chunk.NewMap(4096)
			start := disk.LogicalAddr(3 << 30)
			if err := m.Add(start, c); err != nil {
				t.Fatalf("%s/%d: %v", profile, n, err)
			}
			elements := int(c.Length / S)
			want := layout(profile, n, elements)
			for e := range elements {
				for _, in := range []uint64{0, 1, S - 1} {
					mp, err := m.Mirrors(start+disk.LogicalAddr(uint64(e)*S+in), 0)
					if err != nil {
						t.Fatal(err)
					}
					var got []loc
					for _, l := range mp.Copies {
						row := (uint64(l.Physical) - uint64(offs[l.Stripe]) - in) / S
						if (uint64(l.Physical)-uint64(offs[l.Stripe]))%S != in%S && !mp.Chunk.Profile().Mirrored() {
							t.Fatalf("%s/%d element %d: in-stripe offset lost", profile, n, e)
						}
						if mp.Chunk.Profile().Mirrored() {
							row = (uint64(l.Physical) - uint64(offs[l.Stripe])) / S
						}
						got = append(got, loc{l.Stripe, row})
					}
					if !slices.Equal(got, want[e].copies) || mp.P.Stripe != want[e].p || mp.Q.Stripe != want[e].q {
						t.Fatalf("%s/%d element %d+%d: copies %v P %d Q %d, want %v P %d Q %d", profile, n, e, in,
							got, mp.P.Stripe, mp.Q.Stripe, want[e].copies, want[e].p, want[e].q)
					}
					if !mp.Chunk.Profile().Mirrored() && mp.Length != S-in {
						t.Fatalf("%s/%d: piece length %d at in %d", profile, n, mp.Length, in)
					}
				}
			}
		}
	}
}

func TestMapAddLookup(t *testing.T) {
	m := chunk.NewMap(4096)
	single := func(l uint64) *disk.ChunkItem {
		return mkChunk("single", l, []disk.DevID{1}, []disk.PhysicalAddr{1 << 20})
	}
	for _, l := range []disk.LogicalAddr{100 << 20, 20 << 20, 50 << 20} { // out of order on purpose
		if err := m.Add(l, single(8<<20)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Add(20<<20, single(8<<20)); err != nil {
		t.Fatalf("identical duplicate rejected: %v", err)
	}
	for _, bad := range []struct {
		l    disk.LogicalAddr
		item *disk.ChunkItem
	}{
		{20 << 20, single(4 << 20)},   // same start, different item
		{24 << 20, single(8 << 20)},   // overlaps the end of 20M
		{16 << 20, single(8 << 20)},   // overlaps the start of 20M
		{10 << 20, single(100 << 20)}, // covers several
		{1<<63 - 4096, single(8192)},  // runs past 2^63
		{0, mkChunk("raid10", 8<<20, []disk.DevID{1, 2, 3}, make([]disk.PhysicalAddr, 3))},
		{1 << 30, single(0)},
	} {
		if err := m.Add(bad.l, bad.item); !errors.Is(err, disk.ErrCorrupt) {
			t.Errorf("Add(%d, %d bytes): %v, want corrupt", bad.l, bad.item.Length, err)
		}
	}
	if m.Len() != 3 {
		t.Fatalf("%d chunks after rejected adds", m.Len())
	}
	var starts []disk.LogicalAddr
	for c := range m.All() {
		starts = append(starts, c.Logical())
	}
	if !slices.Equal(starts, []disk.LogicalAddr{20 << 20, 50 << 20, 100 << 20}) {
		t.Fatalf("order %v", starts)
	}
	for _, tc := range []struct {
		l    disk.LogicalAddr
		want disk.LogicalAddr // 0 = unmapped
	}{{20 << 20, 20 << 20}, {28<<20 - 1, 20 << 20}, {28 << 20, 0}, {0, 0}, {108<<20 - 1, 100 << 20}, {1 << 62, 0}} {
		c, err := m.Lookup(tc.l)
		if tc.want == 0 {
			if !errors.Is(err, chunk.ErrNotMapped) || !errors.Is(err, disk.ErrCorrupt) {
				t.Errorf("Lookup(%d): %v, want not mapped", tc.l, err)
			}
			continue
		}
		if err != nil || c.Logical() != tc.want {
			t.Errorf("Lookup(%d) = %v, %v", tc.l, c, err)
		}
	}
	if !m.Remove(50<<20) || m.Remove(50<<20) || m.Len() != 2 {
		t.Fatal("Remove")
	}
	if err := m.Add(24<<20+4096*0+4<<20, single(8<<20)); err != nil { // 28M..36M now free
		t.Fatal(err)
	}
	if ids := m.DevIDs(); !slices.Equal(ids, []disk.DevID{1}) {
		t.Fatalf("devids %v", ids)
	}
}

func TestNewMapFromSuper(t *testing.T) {
	var sb disk.Superblock
	sb.SectorSize = 4096
	sys := mkChunk("dup", 8<<20, []disk.DevID{1, 1}, []disk.PhysicalAddr{21 << 20, 29 << 20})
	sys.Type = disk.BlockGroupSystem | disk.BlockGroupDUP
	disk.Key{ObjectID: 256, Type: disk.ChunkItemKey, Offset: 22020096}.Encode(sb.SysChunkArray[:])
	sys.Encode(sb.SysChunkArray[disk.KeySize:])
	sb.SysChunkArraySize = uint32(disk.KeySize + sys.Size())
	m, err := chunk.NewMapFromSuper(&sb)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := m.Mirrors(22036480, 16384)
	if err != nil {
		t.Fatal(err)
	}
	if len(mp.Copies) != 2 || mp.Copies[0].Physical != 21<<20+16384 || mp.Copies[1].Physical != 29<<20+16384 {
		t.Fatalf("chunk root copies %v", mp.Copies)
	}
	// The chunk tree repeats the SYSTEM chunk: accepted.
	if err := m.Add(22020096, sys); err != nil {
		t.Fatal(err)
	}
}
