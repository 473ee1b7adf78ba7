package alloc

import (
	"fmt"
	"sort"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// FSTGroup is the free-space tree's record of one block group: its
// FREE_SPACE_INFO and the free ranges of its EXTENT or BITMAP items.
type FSTGroup struct {
	Start, Length uint64
	Info          disk.FreeSpaceInfo
	Free          Extents
}

// FreeSpaceTree is the decoded content of a free-space tree, per group in
// ascending order. It may hold groups that no longer exist (mkfs 6.2
// leaves stale entries for its temporary chunks).
type FreeSpaceTree struct {
	Groups []*FSTGroup
}

// Group returns the entry whose key is exactly (start, length), or nil.
func (f *FreeSpaceTree) Group(start, length uint64) *FSTGroup {
	i := sort.Search(len(f.Groups), func(i int) bool { return f.Groups[i].Start >= start })
	if i < len(f.Groups) && f.Groups[i].Start == start && f.Groups[i].Length == length {
		return f.Groups[i]
	}
	return nil
}

// LoadFreeSpaceTree decodes the free-space tree at root. Every EXTENT or
// BITMAP item must lie inside the range of the preceding FREE_SPACE_INFO,
// be sector aligned, not overlap another, and be of the kind the info's
// USING_BITMAPS flag says; a bitmap's payload must be exactly one bit per
// sector; extent_count must equal the number of maximal free runs.
// Violations wrap disk.ErrCorrupt.
func LoadFreeSpaceTree(r ctree.Reader, root ctree.Root, sectorsize uint32) (*FreeSpaceTree, error) {
	if sectorsize == 0 {
		return nil, fmt.Errorf("alloc: sectorsize 0")
	}
	f := &FreeSpaceTree{}
	var cur *FSTGroup
	c := ctree.NewCursor(r, root)
	ok, err := c.Seek(disk.Key{})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		switch k.Type {
		case disk.FreeSpaceInfoKey:
			if err := finishFST(cur); err != nil {
				return nil, err
			}
			cur, err = newFSTGroup(k, c.Data(), f.Groups)
			if err != nil {
				return nil, err
			}
			f.Groups = append(f.Groups, cur)
		case disk.FreeSpaceExtentKey, disk.FreeSpaceBitmapKey:
			if err := addFSTItem(cur, k, c.Data(), sectorsize); err != nil {
				return nil, err
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if err := finishFST(cur); err != nil {
		return nil, err
	}
	return f, nil
}

// newFSTGroup decodes a FREE_SPACE_INFO item.
func newFSTGroup(k disk.Key, data []byte, prev []*FSTGroup) (*FSTGroup, error) {
	g := &FSTGroup{Start: uint64(k.ObjectID), Length: k.Offset}
	if err := g.Info.Decode(data); err != nil {
		return nil, disk.Corruptf("free space info %v: %v", k, err)
	}
	if g.Length == 0 || g.Start+g.Length < g.Start {
		return nil, disk.Corruptf("free space info %v: bad range", k)
	}
	if n := len(prev); n > 0 && prev[n-1].Start+prev[n-1].Length > g.Start {
		return nil, disk.Corruptf("free space info %v overlaps group %d", k, prev[n-1].Start)
	}
	if g.Info.Flags&^disk.FreeSpaceUsingBitmaps != 0 {
		return nil, disk.Corruptf("free space info %v: unknown flags %#x", k, g.Info.Flags)
	}
	return g, nil
}

// addFSTItem adds one FREE_SPACE_EXTENT or FREE_SPACE_BITMAP item to g.
func addFSTItem(g *FSTGroup, k disk.Key, data []byte, sectorsize uint32) error {
	start, length := uint64(k.ObjectID), k.Offset
	ss := uint64(sectorsize)
	switch {
	case g == nil || start < g.Start || length == 0 || start+length < start || start+length > g.Start+g.Length:
		return disk.Corruptf("free space item %v outside its FREE_SPACE_INFO", k)
	case start%ss != 0 || length%ss != 0:
		return disk.Corruptf("free space item %v not sector aligned", k)
	case g.Free.Len() > 0 && g.Free.r[g.Free.Len()-1].End > start:
		return disk.Corruptf("free space item %v overlaps the previous one", k)
	}
	bitmaps := g.Info.Flags&disk.FreeSpaceUsingBitmaps != 0
	if bitmaps != (k.Type == disk.FreeSpaceBitmapKey) {
		return disk.Corruptf("free space item %v disagrees with info flags %#x", k, g.Info.Flags)
	}
	if k.Type == disk.FreeSpaceExtentKey {
		g.Free.Insert(start, start+length)
		return nil
	}
	if uint64(len(data)) != disk.FreeSpaceBitmapSize(length, sectorsize) {
		return disk.Corruptf("free space bitmap %v: %d bytes for %d sectors", k, len(data), length/ss)
	}
	for bit, n := range disk.BitmapRuns(data, length/ss) {
		g.Free.Insert(start+bit*ss, start+(bit+n)*ss)
	}
	return nil
}

// finishFST checks the info's extent_count against the decoded runs. For
// extent items, adjacent items would merge in Free and show up as a count
// mismatch, which is right: the tree must hold maximal runs.
func finishFST(g *FSTGroup) error {
	if g == nil {
		return nil
	}
	if uint64(g.Info.ExtentCount) != uint64(g.Free.Len()) {
		return disk.Corruptf("free space info (%d, %d): extent_count %d but %d free runs",
			g.Start, g.Length, g.Info.ExtentCount, g.Free.Len())
	}
	return nil
}

// CompareFreeSpaceTree checks that every block group has an FST entry with
// the same range whose free ranges equal FreeSpaceTreeView. FST entries
// without a block group are ignored. The error lists the first mismatch.
// Groups not loaded yet are loaded.
func (s *Space) CompareFreeSpaceTree(f *FreeSpaceTree) error {
	for _, g := range s.groups {
		if err := s.LoadGroup(g); err != nil {
			return err
		}
		fg := f.Group(g.Start, g.Length)
		if fg == nil {
			return fmt.Errorf("alloc: block group [%d, +%d) has no free space info", g.Start, g.Length)
		}
		want := s.FreeSpaceTreeView(g)
		if !want.Equal(&fg.Free) {
			return fmt.Errorf("alloc: block group [%d, +%d): extent tree gives free %v, free space tree %v",
				g.Start, g.Length, want.Ranges(), fg.Free.Ranges())
		}
	}
	return nil
}
