package alloc

import "fmt"

// UsedEnd returns the end of the last byte of g that is neither free nor
// excluded: allocated and pinned bytes both count as used, since a
// committed tree may still point at a pinned byte. It returns g.Start for
// a group holding nothing, and g.End() for a group not loaded (LoadGroup).
func (s *Space) UsedEnd(g *BlockGroup) uint64 {
	if g.unloaded {
		return g.End() // not known: as if all of it were in use
	}
	idle := g.Free.Clone()
	for x := range g.Excluded.All() {
		idle.Insert(x.Start, x.End)
	}
	if n := len(idle.r); n > 0 && idle.r[n-1].End >= g.End() {
		return max(g.Start, idle.r[n-1].Start)
	}
	return g.End()
}

// groupAt returns the group starting exactly at start.
func (s *Space) groupAt(start uint64) (*BlockGroup, int, error) {
	for i, g := range s.groups {
		if g.Start == start {
			return g, i, s.LoadGroup(g)
		}
	}
	return nil, 0, fmt.Errorf("alloc: no block group starts at %d", start)
}

// ShrinkGroup cuts the group starting at start to length bytes, for a
// chunk the caller shortens. Only bytes past UsedEnd may go: extents and
// pinned ranges are never cut. Free and excluded ranges past the new end
// disappear with them.
func (s *Space) ShrinkGroup(start, length uint64) error {
	g, _, err := s.groupAt(start)
	if err != nil {
		return err
	}
	switch {
	case length == 0 || length >= g.Length:
		return fmt.Errorf("alloc: shrink group %d from %d to %d bytes: not a cut", start, g.Length, length)
	case length%uint64(s.sectorsize) != 0:
		return fmt.Errorf("alloc: shrink group %d to %d bytes: not a multiple of sector size %d", start, length, s.sectorsize)
	case s.UsedEnd(g) > start+length:
		return fmt.Errorf("alloc: shrink group %d to %d bytes: bytes up to %d are in use", start, length, s.UsedEnd(g))
	}
	g.Free.Remove(start+length, g.End())
	g.Excluded.Remove(start+length, g.End())
	g.Length = length
	return nil
}

// RemoveGroup drops the group starting at start, which must hold nothing
// (no extent, no pinned byte), for a chunk the caller deletes.
func (s *Space) RemoveGroup(start uint64) error {
	g, i, err := s.groupAt(start)
	if err != nil {
		return err
	}
	if g.Used != 0 || s.UsedEnd(g) != g.Start {
		return fmt.Errorf("alloc: remove group %d: %d bytes used, in use up to %d", start, g.Used, s.UsedEnd(g))
	}
	s.groups = append(s.groups[:i], s.groups[i+1:]...)
	return nil
}

// DropGroup removes the group starting at start, emptied by relocation:
// nothing may be allocated in it, but the bytes freed in it stay pinned
// until the commit, and go with it (the commit that removes its chunk is
// the one that frees them; nothing after it can reach them).
func (s *Space) DropGroup(start uint64) error {
	g, i, err := s.groupAt(start)
	if err != nil {
		return err
	}
	if g.Used != 0 {
		return fmt.Errorf("alloc: drop group %d: %d bytes used", start, g.Used)
	}
	s.pinned.Remove(g.Start, g.End())
	s.fresh.Remove(g.Start, g.End())
	s.groups = append(s.groups[:i], s.groups[i+1:]...)
	return nil
}

// CutRelocated cuts the group starting at start to length bytes after a
// resize emptied the part past it: the bytes freed there stay pinned
// until the commit and go with the cut (as DropGroup), then ShrinkGroup's
// rules apply (nothing allocated may remain past the cut).
func (s *Space) CutRelocated(start, length uint64) error {
	g, _, err := s.groupAt(start)
	if err != nil {
		return err
	}
	if length == 0 || length >= g.Length {
		return fmt.Errorf("alloc: cut group %d from %d to %d bytes: not a cut", start, g.Length, length)
	}
	tail, end := start+length, g.End()
	for i := s.pinned.after(tail); i < len(s.pinned.r) && s.pinned.r[i].Start < end; i++ {
		p := s.pinned.r[i]
		g.Free.Insert(max(p.Start, tail), min(p.End, end))
	}
	s.pinned.Remove(tail, end)
	s.fresh.Remove(tail, end)
	if err := s.ShrinkGroup(start, length); err != nil {
		return err
	}
	g.Limit = 0
	return nil
}
