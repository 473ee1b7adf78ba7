package chunk

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"sync"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrNotMapped is wrapped (together with disk.ErrCorrupt) by the error for a
// logical address that no chunk maps.
var ErrNotMapped = errors.New("logical address not mapped by any chunk")

// Map is the logical address space: chunks sorted by logical start, never
// overlapping. It is safe for concurrent use; chunks handed out are
// immutable, so a lookup stays valid after later changes to the Map.
type Map struct {
	sectorSize uint32 // Immutable.

	mu     sync.RWMutex
	chunks []*Chunk // sorted by logical start, disjoint. Protected by mu.
}

// NewMap returns an empty Map for a filesystem with the given sector size
// (used to validate chunk alignment; 0 skips those checks).
func NewMap(sectorSize uint32) *Map { return &Map{sectorSize: sectorSize} }

// NewMapFromSuper returns a Map holding the SYSTEM chunks of the superblock's
// sys_chunk_array: enough to read the chunk tree.
func NewMapFromSuper(sb *disk.Superblock) (*Map, error) {
	m := NewMap(sb.SectorSize)
	if err := m.AddSysChunks(sb); err != nil {
		return nil, err
	}
	return m, nil
}

// AddSysChunks adds every chunk of the superblock's sys_chunk_array.
func (m *Map) AddSysChunks(sb *disk.Superblock) error {
	sys, err := sb.SysChunks()
	if err != nil {
		return err
	}
	for _, e := range sys {
		if err := m.Add(disk.LogicalAddr(e.Key.Offset), &e.Chunk); err != nil {
			return fmt.Errorf("sys_chunk_array: %w", err)
		}
	}
	return nil
}

// Add validates a CHUNK_ITEM found at logical address logical (its key
// offset) and adds it. A chunk overlapping an existing one is rejected,
// except an exact duplicate (same start and identical item), which is
// accepted as a no-op: SYSTEM chunks appear both in the sys_chunk_array and
// in the chunk tree. On error the Map is unchanged; errors wrap
// disk.ErrCorrupt. Adding chunks in ascending order costs O(1) each.
func (m *Map) Add(logical disk.LogicalAddr, it *disk.ChunkItem) error {
	c, err := New(logical, it, m.sectorSize)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.chunks), func(i int) bool { return m.chunks[i].End() > logical })
	if i < len(m.chunks) && m.chunks[i].logical < c.End() {
		old := m.chunks[i]
		if old.logical == logical && sameItem(&old.item, &c.item) {
			return nil
		}
		return corrupt(logical, "length %d overlaps %s", it.Length, old)
	}
	m.chunks = slices.Insert(m.chunks, i, c)
	return nil
}

// sameItem compares two chunk items field by field.
func sameItem(a, b *disk.ChunkItem) bool {
	sa, sb := a.Stripes, b.Stripes
	x, y := *a, *b
	x.Stripes, y.Stripes = nil, nil
	return x.Length == y.Length && x.Owner == y.Owner && x.StripeLen == y.StripeLen && x.Type == y.Type &&
		x.IOAlign == y.IOAlign && x.IOWidth == y.IOWidth && x.SectorSize == y.SectorSize &&
		x.NumStripes == y.NumStripes && x.SubStripes == y.SubStripes && slices.Equal(sa, sb)
}

// Remove deletes the chunk starting at logical and reports whether there
// was one.
func (m *Map) Remove(logical disk.LogicalAddr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, found := slices.BinarySearchFunc(m.chunks, logical, func(c *Chunk, l disk.LogicalAddr) int {
		return cmpAddr(c.logical, l)
	})
	if found {
		m.chunks = slices.Delete(m.chunks, i, i+1)
	}
	return found
}

func cmpAddr(a, b disk.LogicalAddr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Lookup returns the chunk mapping logical. An unmapped address is
// corruption from the caller's point of view (a pointer into nowhere): the
// error wraps disk.ErrCorrupt and ErrNotMapped.
func (m *Map) Lookup(logical disk.LogicalAddr) (*Chunk, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := sort.Search(len(m.chunks), func(i int) bool { return m.chunks[i].End() > logical })
	if i < len(m.chunks) && m.chunks[i].logical <= logical {
		return m.chunks[i], nil
	}
	return nil, &disk.CorruptError{Logical: logical, What: "address outside every chunk", Err: ErrNotMapped}
}

// Len returns the number of chunks.
func (m *Map) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.chunks)
}

// Chunks returns the chunks in logical order (a snapshot).
func (m *Map) Chunks() []*Chunk {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.chunks)
}

// All iterates over a snapshot of the chunks in logical order.
func (m *Map) All() iter.Seq[*Chunk] {
	return slices.Values(m.Chunks())
}

// DevIDs returns the device ids referenced by any chunk, ascending. Devices
// in this list but not in a device set are missing.
func (m *Map) DevIDs() []disk.DevID {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var ids []disk.DevID
	for _, c := range m.chunks {
		for _, s := range c.item.Stripes {
			ids = append(ids, s.DevID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Mirrors maps the logical range starting at logical (see Chunk.MapRange).
func (m *Map) Mirrors(logical disk.LogicalAddr, length uint64) (*Mapping, error) {
	c, err := m.Lookup(logical)
	if err != nil {
		return nil, err
	}
	mp := new(Mapping)
	c.MapRange(logical, length, mp)
	return mp, nil
}
