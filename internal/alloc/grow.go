package alloc

import (
	"fmt"
	"slices"

	"github.com/gobtrfs/btrfs/internal/chunk"
)

// AddGroup adds a new, empty block group [start, start+length) with the
// given type and profile flags, for a chunk the caller has just allocated.
// excluded are the logical ranges that map onto superblock copies (from
// chunk.Chunk.SuperblockExclusions): they are never handed out but stay free
// in the free-space tree view, exactly as for groups found at load time.
// Everything else in the group is allocatable at once: a new chunk holds
// nothing a committed tree could point at, so nothing needs pinning. The
// group must not overlap an existing one.
func (s *Space) AddGroup(start, length, flags uint64, excluded []chunk.Range) error {
	end := start + length
	if length == 0 || end < start {
		return fmt.Errorf("alloc: add group [%d, +%d): bad range", start, length)
	}
	i, _ := slices.BinarySearchFunc(s.groups, start, func(g *BlockGroup, a uint64) int {
		switch {
		case g.Start < a:
			return -1
		case g.Start > a:
			return 1
		}
		return 0
	})
	if (i > 0 && s.groups[i-1].End() > start) || (i < len(s.groups) && s.groups[i].Start < end) {
		return fmt.Errorf("alloc: add group [%d, +%d): overlaps an existing group", start, length)
	}
	g := &BlockGroup{Start: start, Length: length, Flags: flags, excl: excluded}
	g.Free.Insert(start, end)
	for _, x := range excluded {
		lo, hi := max(uint64(x.Start), start), min(uint64(x.End()), end)
		if lo < hi {
			g.Excluded.Insert(lo, hi)
		}
	}
	for x := range g.Excluded.All() {
		g.Free.Remove(x.Start, x.End)
	}
	s.groups = slices.Insert(s.groups, i, g)
	return nil
}

// Release gives back [addr, addr+size) at once, unlike Free: the caller
// guarantees the bytes were allocated since the last commit and never
// written, so no committed tree can point at them and pinning would only
// waste them (and keep a commit's bookkeeping from settling, since every
// pass would then move blocks to new addresses). The range must be
// allocated: inside one group, not free, excluded or pinned.
func (s *Space) Release(addr, size uint64) error {
	end := addr + size
	g, err := s.loadedGroup(addr)
	if err != nil {
		return err
	}
	switch {
	case size == 0 || end < addr:
		return fmt.Errorf("alloc: release [%d, +%d): bad range", addr, size)
	case g == nil || end > g.End():
		return fmt.Errorf("alloc: release [%d, +%d): not inside one block group", addr, size)
	case g.Free.Overlaps(addr, end) || g.Excluded.Overlaps(addr, end) || s.pinned.Overlaps(addr, end):
		return fmt.Errorf("alloc: release [%d, +%d): range is not allocated", addr, size)
	case size > g.Used:
		return fmt.Errorf("alloc: release [%d, +%d): group used is only %d", addr, size, g.Used)
	}
	g.Used -= size
	g.Free.Insert(addr, end)
	return nil
}
