package chunk_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// fuzzEntry encodes (logical, chunk item) the way FuzzMap parses it.
func fuzzEntry(logical uint64, it *disk.ChunkItem) []byte {
	b := binary.LittleEndian.AppendUint64(nil, logical)
	item := make([]byte, it.Size())
	it.Encode(item)
	return append(b, item...)
}

// FuzzMap feeds arbitrary chunk items to Map.Add and then maps, reverse
// maps and reads through whatever was accepted. Nothing may panic, and
// accepted chunks must never overlap.
func FuzzMap(f *testing.F) {
	for _, g := range geometries {
		devs := make([]disk.DevID, g.n)
		offs := make([]disk.PhysicalAddr, g.n)
		for k := range devs {
			devs[k], offs[k] = disk.DevID(k%4+1), disk.PhysicalAddr(1<<20+k*S)
		}
		seed := fuzzEntry(1<<20, mkChunk(g.profile, 4*S*uint64(g.n), devs, offs))
		seed = append(seed, fuzzEntry(64<<20, mkChunk("single", 8<<20, devs[:1], offs[:1]))...)
		f.Add(seed, uint64(1<<20+S-7), uint16(100))
	}
	f.Fuzz(func(t *testing.T, b []byte, probe uint64, n uint16) {
		m := chunk.NewMap(4096)
		for len(b) >= 8 {
			logical := disk.LogicalAddr(binary.LittleEndian.Uint64(b))
			var it disk.ChunkItem
			if it.Decode(b[8:]) != nil {
				break
			}
			if err := m.Add(logical, &it); err != nil && !errors.Is(err, disk.ErrCorrupt) {
				t.Fatalf("non-corrupt error %v", err)
			}
			b = b[8+it.Size():]
		}
		var prev *chunk.Chunk
		devs := map[disk.DevID]blockdev.Device{}
		for id := disk.DevID(1); id <= 4; id++ {
			devs[id] = blockdev.NewMem(4 << 20)
		}
		r := chunk.NewReader(m, devs)
		var mp chunk.Mapping
		for c := range m.All() {
			if prev != nil && prev.End() > c.Logical() {
				t.Fatalf("%v overlaps %v", prev, c)
			}
			prev = c
			l := c.Logical() + disk.LogicalAddr(probe%c.Length())
			c.MapRange(l, uint64(n), &mp)
			if mp.Length == 0 || mp.Length > uint64(max(n, 1)) && n != 0 || len(mp.Copies) == 0 {
				t.Fatalf("%v: mapping %+v", c, mp)
			}
			for _, cp := range mp.Copies {
				c.Rmap(cp.DevID, cp.Physical)
			}
			c.SuperblockExclusions()
			c.DevExtents()
			buf := make([]byte, min(int(mp.Length), 4096))
			r.ReadLogical(buf, l, func(disk.LogicalAddr, []byte) bool { return probe&1 == 0 })
		}
		if _, err := m.Lookup(disk.LogicalAddr(probe)); err != nil && !errors.Is(err, chunk.ErrNotMapped) {
			t.Fatal(err)
		}
	})
}
