package alloc

import "fmt"

// The two calls below serve log replay (docs/design/0016): the blocks of
// a log tree and the data extents only a log references lie in bytes the
// extent tree calls free, and must not be handed out before the log is
// replayed and that replay committed.

// PinFree takes [addr, addr+size), which must be allocatable, out of the
// free space and pins it as if a transaction had freed it: Alloc never
// hands it out, the free-space tree still records it free, and the next
// commit's Seal makes it allocatable once that commit is durable.
func (s *Space) PinFree(addr, size uint64) error {
	g, err := s.freeRange(addr, size)
	if err != nil {
		return err
	}
	g.Free.Remove(addr, addr+size)
	s.pinned.Insert(addr, addr+size)
	s.fresh.Insert(addr, addr+size)
	return nil
}

// Take allocates exactly [addr, addr+size), which must be allocatable:
// Alloc at a fixed address.
func (s *Space) Take(addr, size uint64) error {
	g, err := s.freeRange(addr, size)
	if err != nil {
		return err
	}
	g.Free.Remove(addr, addr+size)
	g.Used += size
	return nil
}

// freeRange returns the group holding [addr, addr+size) when all of it is
// allocatable.
func (s *Space) freeRange(addr, size uint64) (*BlockGroup, error) {
	end := addr + size
	g, err := s.loadedGroup(addr)
	if err != nil {
		return nil, err
	}
	switch {
	case size == 0 || end < addr:
		return nil, fmt.Errorf("alloc: [%d, +%d): bad range", addr, size)
	case g == nil || end > g.End():
		return nil, fmt.Errorf("alloc: [%d, +%d): not inside one block group", addr, size)
	case !g.Free.Contains(addr, end):
		return nil, fmt.Errorf("alloc: [%d, +%d): not free", addr, size)
	}
	return g, nil
}

// IsFree reports whether all of [addr, addr+size) is allocatable, and
// whether any of it is. The error is that of loading the group.
func (s *Space) IsFree(addr, size uint64) (all, any bool, err error) {
	g, err := s.loadedGroup(addr)
	if g == nil || err != nil {
		return false, false, err
	}
	return g.Free.Contains(addr, addr+size), g.Free.Overlaps(addr, addr+size), nil
}
