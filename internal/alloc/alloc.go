package alloc

import (
	"fmt"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrNoSpace is returned by Alloc when no block group of the wanted type
// has a free, aligned range of the wanted size. It wraps syscall.ENOSPC,
// so the filesystem's callers see the errno Linux gives.
var ErrNoSpace = fmt.Errorf("alloc: no space left in block groups: %w", syscall.ENOSPC)

// stripeLen is the 64 KiB stripe element: a tree block must not cross one
// (relative to its chunk start) or it would be split across devices.
const stripeLen = 64 << 10

// typeMatches reports whether a group with flags g may hold extents of
// type want (DATA, METADATA or SYSTEM). Mixed groups take data and
// metadata.
func typeMatches(g, want uint64) bool {
	return g&disk.BlockGroupTypeMask&want != 0
}

// Alloc reserves size bytes in the first block group of type want whose
// allocatable space has a range starting at a multiple of align (0 means
// the sector size), first fit in ascending logical order. Metadata and
// system allocations never cross a 64 KiB stripe boundary of their chunk.
// The bytes leave the group's Free set and are added to its Used.
func (s *Space) Alloc(want, size, align uint64) (uint64, error) {
	want &= disk.BlockGroupTypeMask
	if want == 0 || want&(want-1) != 0 {
		return 0, fmt.Errorf("alloc: type %#x is not exactly one of DATA, METADATA, SYSTEM", want)
	}
	if align == 0 {
		align = uint64(s.sectorsize)
	}
	if size == 0 || size%uint64(s.sectorsize) != 0 || align%uint64(s.sectorsize) != 0 {
		return 0, fmt.Errorf("alloc: size %d / align %d not a multiple of sector size %d", size, align, s.sectorsize)
	}
	noCross := want != disk.BlockGroupData
	if noCross && size > stripeLen {
		return 0, fmt.Errorf("alloc: tree block size %d exceeds the 64 KiB stripe", size)
	}
	for _, g := range s.groups {
		if !typeMatches(g.Flags, want) || g.ReadOnly {
			continue
		}
		if g.unloaded {
			if s.FreeBytes(g) < size {
				continue // cannot fit: not worth loading
			}
			if err := s.LoadGroup(g); err != nil {
				return 0, err
			}
		}
		if a, ok := findIn(g, size, align, noCross); ok {
			g.Free.Remove(a, a+size)
			g.Used += size
			return a, nil
		}
	}
	return 0, ErrNoSpace
}

// findIn is the first-fit search in one group, skipping candidates that
// would cross a stripe boundary when noCross is set.
func findIn(g *BlockGroup, size, align uint64, noCross bool) (uint64, bool) {
	from := g.Start
	for {
		a, ok := g.Free.Find(size, align, from)
		if !ok {
			return 0, false
		}
		if g.Limit != 0 && a+size > g.Limit {
			return 0, false // Find is first fit: nothing later fits either
		}
		rel := a - g.Start
		if !noCross || rel/stripeLen == (rel+size-1)/stripeLen {
			return a, true
		}
		from = g.Start + (rel/stripeLen+1)*stripeLen
	}
}

// Free releases [addr, addr+size), which must be allocated (inside one
// block group, not free, excluded or already pinned). The bytes leave the
// group's Used at once but stay pinned, never handed out by Alloc, until
// Unpin: the last committed trees may still point at them.
func (s *Space) Free(addr, size uint64) error {
	end := addr + size
	g, err := s.loadedGroup(addr)
	if err != nil {
		return err
	}
	switch {
	case size == 0 || end < addr:
		return fmt.Errorf("alloc: free [%d, +%d): bad range", addr, size)
	case g == nil || end > g.End():
		return fmt.Errorf("alloc: free [%d, +%d): not inside one block group", addr, size)
	case g.Free.Overlaps(addr, end) || g.Excluded.Overlaps(addr, end) || s.pinned.Overlaps(addr, end):
		return fmt.Errorf("alloc: free [%d, +%d): range is not allocated", addr, size)
	case size > g.Used:
		return fmt.Errorf("alloc: free [%d, +%d): group used is only %d", addr, size, g.Used)
	}
	g.Used -= size
	s.pinned.Insert(addr, end)
	s.fresh.Insert(addr, end)
	return nil
}

// loadedGroup is Group, loaded (nil when no group holds a).
func (s *Space) loadedGroup(a uint64) (*BlockGroup, error) {
	g := s.Group(a)
	if g != nil {
		if err := s.LoadGroup(g); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Unpin makes every pinned range allocatable again. The commit calls it
// once the superblock that no longer references them is durable.
func (s *Space) Unpin() {
	for p := range s.pinned.All() {
		for a := p.Start; a < p.End; {
			g := s.Group(a) // pinned ranges may span adjacent groups after merging
			if g == nil {
				break // cannot happen: Free only pins bytes inside groups
			}
			e := min(p.End, g.End())
			g.Free.Insert(a, e)
			a = e
		}
	}
	s.pinned, s.fresh = Extents{}, Extents{}
}

// Seal returns the bytes pinned since the last Seal (or Unpin) and starts
// a new set: a commit seals what its transaction freed and, once its
// superblock is durable, gives the set to UnpinSet, while the next
// transaction's frees collect in the new set.
func (s *Space) Seal() Extents {
	e := s.fresh
	s.fresh = Extents{}
	return e
}

// UnpinSet makes the ranges of set (from Seal) allocatable again. Ranges
// no longer pinned (a later Unpin took them) are skipped.
func (s *Space) UnpinSet(set Extents) {
	for p := range set.All() {
		for a := p.Start; a < p.End; {
			g := s.Group(a)
			if g == nil {
				break
			}
			e := min(p.End, g.End())
			if s.pinned.Contains(a, e) {
				s.pinned.Remove(a, e)
				s.fresh.Remove(a, e)
				g.Free.Insert(a, e)
			}
			a = e
		}
	}
}
