package alloc

import (
	"fmt"
	"sort"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// BlockGroup is one block group as the allocator sees it.
type BlockGroup struct {
	// Start and Length are the group's logical range (= its chunk's).
	Start, Length uint64
	// Used is the bytes allocated to extents in the group, as the
	// BLOCK_GROUP_ITEM says at load time and updated by Alloc and Free.
	Used uint64
	// Flags are the block group type and profile bits.
	Flags uint64
	// Free holds the allocatable bytes: the gaps between extents, minus
	// superblock-exclusion ranges and minus pinned ranges.
	Free Extents
	// Excluded holds the gaps that map onto a superblock copy (or lie
	// below logical 64 KiB): never allocated, but free in the FST.
	Excluded Extents
	// ReadOnly keeps Alloc out of the group: a resize empties it to
	// remove its chunk (the kernel's read-only block group).
	ReadOnly bool
	// Limit, when not 0, keeps Alloc below this address: a resize empties
	// the group's tail to cut its chunk there.
	Limit uint64
	// unloaded is set while Free and Excluded do not hold the group's
	// state yet: a Space from LoadLazy sets it until something needs the
	// group's free space (Space.LoadGroup). Used, from the group's item,
	// is known from the start.
	unloaded bool
	// excl are the superblock-exclusion ranges inside the group, from its
	// chunk: what Excluded becomes at load, where they are free.
	excl []chunk.Range
}

// End returns Start + Length.
func (g *BlockGroup) End() uint64 { return g.Start + g.Length }

// Space is the free-space model of a whole filesystem: every block group,
// ordered by start, plus the set of pinned (freed, not yet reusable) bytes.
type Space struct {
	groups []*BlockGroup
	pinned Extents
	// fresh is the part of pinned freed since the last Seal: the bytes
	// the transaction being committed freed, reusable once its
	// superblock is durable (UnpinSet), while a later transaction's
	// frees stay pinned.
	fresh      Extents
	nodesize   uint32
	sectorsize uint32
	// load, when set, fills an unloaded group's Free and Excluded from
	// the extent tree (LoadLazy).
	load func(g *BlockGroup) error
}

// Groups returns the block groups in ascending logical order. The pointers
// are the live groups: callers may read them but must change them only
// through Space methods.
func (s *Space) Groups() []*BlockGroup { return s.groups }

// Pinned returns the set of pinned bytes (read only).
func (s *Space) Pinned() *Extents { return &s.pinned }

// Group returns the block group containing logical address a, or nil.
func (s *Space) Group(a uint64) *BlockGroup {
	i := sort.Search(len(s.groups), func(i int) bool { return s.groups[i].End() > a })
	if i < len(s.groups) && s.groups[i].Start <= a {
		return s.groups[i]
	}
	return nil
}

// Load builds the Space of a filesystem whose block group items live in
// the extent tree (no BLOCK_GROUP_TREE feature). See LoadFrom.
func Load(r ctree.Reader, extentRoot ctree.Root, m *chunk.Map, nodesize, sectorsize uint32) (*Space, error) {
	return LoadFrom(r, extentRoot, extentRoot, m, nodesize, sectorsize)
}

// LoadFrom builds the Space from the BLOCK_GROUP_ITEMs of bgRoot (the
// extent tree, or the block-group tree) and the EXTENT_ITEM and
// METADATA_ITEM keys of extentRoot. Every group must match a chunk of m
// exactly and every chunk must have a group; every extent must lie inside
// one group and not overlap the previous one. Violations wrap
// disk.ErrCorrupt.
func LoadFrom(r ctree.Reader, bgRoot, extentRoot ctree.Root, m *chunk.Map, nodesize, sectorsize uint32) (*Space, error) {
	if nodesize == 0 || sectorsize == 0 {
		return nil, fmt.Errorf("alloc: nodesize %d, sectorsize %d", nodesize, sectorsize)
	}
	s := &Space{nodesize: nodesize, sectorsize: sectorsize}
	if err := s.loadGroups(r, bgRoot, m); err != nil {
		return nil, err
	}
	if err := s.loadExtents(r, extentRoot); err != nil {
		return nil, err
	}
	for _, g := range s.groups {
		g.exclude()
	}
	return s, nil
}

// LoadLazy is LoadFrom that reads, at once, only the block groups: one
// BLOCK_GROUP_ITEM per chunk, found by a search each when they live in the
// extent tree, or the whole (small) block-group tree. A group's free
// space is read from the extent items inside it (a range search of the
// extent tree at extentRoot, whose blocks r verifies) the first time a
// method needs it, so an open costs the same on any size of filesystem,
// and a change costs the groups it allocates in or frees from.
//
// The extent tree at extentRoot must stay readable while groups are
// loaded; root, when not nil, is asked for the current committed extent
// tree at each load instead (a transaction layer that commits passes
// its own). A group is only loaded before its first change, so the
// committed extent tree still describes it then.
func LoadLazy(r ctree.Reader, bgRoot, extentRoot ctree.Root, root func() (ctree.Root, error), m *chunk.Map, nodesize, sectorsize uint32) (*Space, error) {
	if nodesize == 0 || sectorsize == 0 {
		return nil, fmt.Errorf("alloc: nodesize %d, sectorsize %d", nodesize, sectorsize)
	}
	s := &Space{nodesize: nodesize, sectorsize: sectorsize}
	var err error
	if bgRoot == extentRoot {
		err = s.findGroups(r, bgRoot, m)
	} else {
		err = s.loadGroups(r, bgRoot, m)
	}
	if err != nil {
		return nil, err
	}
	for _, g := range s.groups {
		g.unloaded = true
	}
	if root == nil {
		root = func() (ctree.Root, error) { return extentRoot, nil }
	}
	s.load = func(g *BlockGroup) error {
		er, err := root()
		if err != nil {
			return err
		}
		return s.loadGroupExtents(r, er, g)
	}
	return s, nil
}

// exclude moves the superblock-exclusion ranges that are free from Free
// to Excluded, and marks g loaded.
func (g *BlockGroup) exclude() {
	for _, x := range g.excl {
		lo, hi := uint64(x.Start), uint64(x.End())
		for gap := range g.Free.All() {
			if a, b := max(lo, gap.Start), min(hi, gap.End); a < b {
				g.Excluded.Insert(a, b)
			}
		}
	}
	for x := range g.Excluded.All() {
		g.Free.Remove(x.Start, x.End)
	}
	g.unloaded = false
}

// Loaded reports whether g's free space is known (see LoadLazy).
func (g *BlockGroup) Loaded() bool { return !g.unloaded }

// LoadGroup makes sure g's free space is loaded (see LoadLazy). An error
// wraps disk.ErrCorrupt when the extent items inside g break the rules of
// LoadFrom; g stays unloaded then.
func (s *Space) LoadGroup(g *BlockGroup) error {
	if !g.unloaded {
		return nil
	}
	if s.load == nil {
		return fmt.Errorf("alloc: block group %d: free space not loaded", g.Start)
	}
	return s.load(g)
}

// LoadAll loads every group: what operations over the whole filesystem
// (resize, relocation, a space cache conversion) start with.
func (s *Space) LoadAll() error {
	for _, g := range s.groups {
		if err := s.LoadGroup(g); err != nil {
			return err
		}
	}
	return nil
}

// FreeBytes returns the allocatable bytes of g. For a group not loaded
// yet it is what loading would find on a consistent filesystem: the
// group's length less its used bytes and its superblock exclusions (an
// unloaded group has no pinned bytes: nothing was freed from it).
func (s *Space) FreeBytes(g *BlockGroup) uint64 {
	if !g.unloaded {
		return g.Free.Bytes()
	}
	n := g.Length - min(g.Length, g.Used)
	for _, x := range g.excl {
		lo, hi := max(uint64(x.Start), g.Start), min(uint64(x.Start)+x.Length, g.End())
		if lo < hi {
			n -= min(n, hi-lo)
		}
	}
	return n
}

// loadGroups reads every BLOCK_GROUP_ITEM and checks it against m.
func (s *Space) loadGroups(r ctree.Reader, root ctree.Root, m *chunk.Map) error {
	c := ctree.NewCursor(r, root)
	ok, err := c.Seek(disk.Key{})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.Type != disk.BlockGroupItemKey {
			continue
		}
		var it disk.BlockGroupItem
		if err := it.Decode(c.Data()); err != nil {
			return disk.Corruptf("block group %d: %v", k.ObjectID, err)
		}
		g := &BlockGroup{Start: uint64(k.ObjectID), Length: k.Offset, Used: it.Used, Flags: it.Flags}
		if err := checkGroup(g, m, s.groups); err != nil {
			return err
		}
		s.groups = append(s.groups, g)
	}
	if err != nil {
		return err
	}
	if len(s.groups) != m.Len() {
		return disk.Corruptf("%d block groups for %d chunks", len(s.groups), m.Len())
	}
	return nil
}

// findGroups finds the BLOCK_GROUP_ITEM of every chunk of m in the tree
// at root by a search each, where loadGroups would read a whole extent
// tree to find them among the extent items.
func (s *Space) findGroups(r ctree.Reader, root ctree.Root, m *chunk.Map) error {
	for c := range m.All() {
		k := disk.Key{ObjectID: disk.ObjectID(c.Logical()), Type: disk.BlockGroupItemKey, Offset: c.Length()}
		cur := ctree.NewCursor(r, root)
		ok, err := cur.Seek(k)
		if err != nil {
			return err
		}
		if !ok || cur.Key() != k {
			return disk.Corruptf("chunk %d length %d has no block group item", c.Logical(), c.Length())
		}
		var it disk.BlockGroupItem
		if err := it.Decode(cur.Data()); err != nil {
			return disk.Corruptf("block group %d: %v", k.ObjectID, err)
		}
		g := &BlockGroup{Start: uint64(k.ObjectID), Length: k.Offset, Used: it.Used, Flags: it.Flags}
		if err := checkGroup(g, m, s.groups); err != nil {
			return err
		}
		s.groups = append(s.groups, g)
	}
	return nil
}

// checkGroup verifies g against its chunk and the previous groups (keys
// are sorted, so g must start after the previous group's end).
func checkGroup(g *BlockGroup, m *chunk.Map, prev []*BlockGroup) error {
	c, err := m.Lookup(disk.LogicalAddr(g.Start))
	if err != nil {
		return disk.Corruptf("block group %d: %v", g.Start, err)
	}
	if uint64(c.Logical()) != g.Start || c.Length() != g.Length || c.Type() != g.Flags {
		return disk.Corruptf("block group [%d, +%d) flags %#x does not match chunk %d length %d type %#x",
			g.Start, g.Length, g.Flags, c.Logical(), c.Length(), c.Type())
	}
	if g.Used > g.Length {
		return disk.Corruptf("block group %d: used %d > length %d", g.Start, g.Used, g.Length)
	}
	if n := len(prev); n > 0 && prev[n-1].End() > g.Start {
		return disk.Corruptf("block group %d overlaps block group %d", g.Start, prev[n-1].Start)
	}
	g.excl = c.SuperblockExclusions()
	return nil
}

// loadGroupExtents fills g's Free with the gaps between the extent items
// of the tree at root that lie inside it, checked as loadExtents checks
// them (inside the group, not overlapping each other), and the last extent
// item before the group must end before it.
func (s *Space) loadGroupExtents(r ctree.Reader, root ctree.Root, g *BlockGroup) error {
	length := func(k disk.Key) uint64 {
		switch k.Type {
		case disk.ExtentItemKey:
			return k.Offset
		case disk.MetadataItemKey:
			return uint64(s.nodesize)
		}
		return 0
	}
	var free Extents
	last := g.Start
	c := ctree.NewCursor(r, root)
	ok, err := c.SeekLE(disk.Key{ObjectID: disk.ObjectID(g.Start)})
	for ; ok && err == nil; ok, err = c.Prev() {
		// Only an extent's own keys (its refs) and block group items sit
		// between the last extent item before g and g's start.
		if k := c.Key(); k.ObjectID < disk.ObjectID(g.Start) && length(k) != 0 {
			if e := uint64(k.ObjectID) + length(k); e > g.Start || e < uint64(k.ObjectID) {
				return disk.Corruptf("extent item %v not inside one block group", k)
			}
			break
		}
	}
	if err != nil {
		return err
	}
	c = ctree.NewCursor(r, root)
	ok, err = c.Seek(disk.Key{ObjectID: disk.ObjectID(g.Start)})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		start := uint64(k.ObjectID)
		if start >= g.End() {
			break
		}
		n := length(k)
		if n == 0 {
			if k.Type == disk.ExtentItemKey {
				return disk.Corruptf("extent item %v: bad length", k)
			}
			continue
		}
		if start+n < start {
			return disk.Corruptf("extent item %v: bad length", k)
		}
		if start < last {
			return disk.Corruptf("extent item %v overlaps the previous extent ending at %d", k, last)
		}
		if start+n > g.End() {
			return disk.Corruptf("extent item %v not inside one block group", k)
		}
		free.Insert(last, start)
		last = start + n
	}
	if err != nil {
		return err
	}
	free.Insert(last, g.End())
	g.Free, g.Excluded = free, Extents{}
	g.exclude()
	return nil
}

// loadExtents fills each group's Free with the gaps between the extents of
// the extent tree that lie inside it.
func (s *Space) loadExtents(r ctree.Reader, root ctree.Root) error {
	pos := make(map[*BlockGroup]uint64, len(s.groups)) // end of last extent seen
	var last uint64
	c := ctree.NewCursor(r, root)
	ok, err := c.Seek(disk.Key{})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		var length uint64
		switch k.Type {
		case disk.ExtentItemKey:
			length = k.Offset
		case disk.MetadataItemKey:
			length = uint64(s.nodesize)
		default:
			continue
		}
		start := uint64(k.ObjectID)
		if length == 0 || start+length < start {
			return disk.Corruptf("extent item %v: bad length", k)
		}
		if start < last {
			return disk.Corruptf("extent item %v overlaps the previous extent ending at %d", k, last)
		}
		last = start + length
		g := s.Group(start)
		if g == nil || last > g.End() {
			return disk.Corruptf("extent item %v not inside one block group", k)
		}
		p, seen := pos[g]
		if !seen {
			p = g.Start
		}
		g.Free.Insert(p, start)
		pos[g] = last
	}
	if err != nil {
		return err
	}
	for _, g := range s.groups {
		p, seen := pos[g]
		if !seen {
			p = g.Start
		}
		g.Free.Insert(p, g.End())
	}
	return nil
}

// FreeSpaceTreeView returns the free ranges the free-space tree should
// record for g, which must be loaded, once the current transaction
// commits: the allocatable ranges plus the excluded ranges (the FST does
// not know about superblock exclusions) plus the pinned ranges inside g
// (freed extents are gone from the extent tree already).
func (s *Space) FreeSpaceTreeView(g *BlockGroup) Extents {
	v := g.Free.Clone()
	for x := range g.Excluded.All() {
		v.Insert(x.Start, x.End)
	}
	for i := s.pinned.after(g.Start); i < len(s.pinned.r) && s.pinned.r[i].Start < g.End(); i++ {
		p := s.pinned.r[i]
		v.Insert(max(p.Start, g.Start), min(p.End, g.End()))
	}
	return v
}
