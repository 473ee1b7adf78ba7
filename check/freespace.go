package check

import (
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// span is a logical byte range.
type span struct {
	start disk.LogicalAddr
	len   uint64
}

func (s span) end() disk.LogicalAddr { return s.start + disk.LogicalAddr(s.len) }

// appendMerged appends s to runs, joining it with the last run when they
// touch, so two descriptions of the same free space compare equal however
// they were split (extents or bitmaps).
func appendMerged(runs []span, s span) []span {
	if s.len == 0 {
		return runs
	}
	if n := len(runs); n > 0 && runs[n-1].end() == s.start {
		runs[n-1].len += s.len
		return runs
	}
	return append(runs, s)
}

// checkFreeSpace compares the free-space tree with what the extent tree
// leaves free in each block group: the group minus its extents. The
// ranges under superblock copies are never allocated but count as free
// in the tree, as the kernel keeps them.
func (c *checker) checkFreeSpace() error {
	if c.sb.CompatROFlags&disk.CompatROFreeSpaceTree == 0 {
		return c.checkSpaceCacheV1()
	}
	t, ok := c.tree(disk.FreeSpaceTreeObjectID)
	if !ok {
		c.problemf(KindFreeSpace, disk.FreeSpaceTreeObjectID, 0, nil, "free space tree enabled but its root item is missing")
		return nil
	}
	// Actual free runs per block group, from the tree.
	type group struct {
		info    bool
		length  uint64
		count   uint32
		bitmaps bool
		runs    []span
		entries uint32
	}
	groups := map[disk.LogicalAddr]*group{}
	var cur *group
	var curStart disk.LogicalAddr
	var curEnd disk.LogicalAddr
	err := c.forEachItem(t, func(k disk.Key, data []byte, leaf disk.Node) error {
		kk := k
		switch k.Type {
		case disk.FreeSpaceInfoKey:
			var fi disk.FreeSpaceInfo
			if err := fi.Decode(data); err != nil {
				c.problemf(KindItem, disk.FreeSpaceTreeObjectID, leaf.Bytenr(), &kk, "free space info %v: %v", k, err)
				return nil
			}
			curStart, curEnd = disk.LogicalAddr(k.ObjectID), disk.LogicalAddr(uint64(k.ObjectID)+k.Offset)
			cur = &group{info: true, length: k.Offset, count: fi.ExtentCount, bitmaps: fi.Flags&disk.FreeSpaceUsingBitmaps != 0}
			groups[curStart] = cur
		case disk.FreeSpaceExtentKey, disk.FreeSpaceBitmapKey:
			s := span{disk.LogicalAddr(k.ObjectID), k.Offset}
			if cur == nil || s.start < curStart || s.end() > curEnd {
				c.problemf(KindFreeSpace, disk.FreeSpaceTreeObjectID, s.start, &kk, "free space entry %v lies outside any block group's free space info", k)
				return nil
			}
			if k.Type == disk.FreeSpaceExtentKey {
				if cur.bitmaps {
					c.problemf(KindFreeSpace, disk.FreeSpaceTreeObjectID, s.start, &kk, "free space extent %v in a block group using bitmaps", k)
				}
				cur.runs = appendMerged(cur.runs, s)
				cur.entries++
				return nil
			}
			if !cur.bitmaps {
				c.problemf(KindFreeSpace, disk.FreeSpaceTreeObjectID, s.start, &kk, "free space bitmap %v in a block group using extents", k)
			}
			ss := uint64(c.sb.SectorSize)
			prevEnd := disk.LogicalAddr(0)
			for first, n := range disk.BitmapRuns(data, k.Offset/ss) {
				r := span{s.start + disk.LogicalAddr(first*ss), n * ss}
				// A run that starts at the bitmap's first bit continues
				// the previous entry's run.
				if r.start != prevEnd || r.start == s.start {
					cur.entries++
				}
				cur.runs = appendMerged(cur.runs, r)
				prevEnd = r.end()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Expected free runs per block group.
	ei := 0
	for _, bg := range c.bgs {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		end := bg.start + disk.LogicalAddr(bg.length)
		want := freeRuns(bg.start, end, c.usedIn(&ei, bg.start, end))
		g := groups[bg.start]
		if g == nil {
			c.problemf(KindFreeSpace, disk.FreeSpaceTreeObjectID, bg.start, nil, "block group %d has no free space info", bg.start)
			continue
		}
		delete(groups, bg.start)
		if g.count != uint32(len(g.runs)) {
			c.problemf(KindFreeSpace, disk.FreeSpaceTreeObjectID, bg.start, nil, "block group %d free space info says %d extents, the tree holds %d", bg.start, g.count, len(g.runs))
		}
		if !equalRuns(want, g.runs) {
			c.problemf(KindFreeSpace, disk.FreeSpaceTreeObjectID, bg.start, nil, "block group %d has wrong amount of free space: free space tree has %d bytes in %d runs, extent tree leaves %d bytes in %d runs",
				bg.start, total(g.runs), len(g.runs), total(want), len(want))
		}
	}
	starts := make([]disk.LogicalAddr, 0, len(groups))
	for s := range groups {
		starts = append(starts, s)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for _, s := range starts {
		c.problemf(KindFreeSpace, disk.FreeSpaceTreeObjectID, s, nil, "Space key logical %d length %d has no corresponding block group", s, groups[s].length)
	}
	return nil
}

// usedIn returns the extents (c.extents, sorted) that reach into
// [start, end). *ei is the first extent not wholly below start, kept
// between calls on block groups in address order.
func (c *checker) usedIn(ei *int, start, end disk.LogicalAddr) []span {
	for *ei < len(c.extents) && c.extents[*ei].end() <= start {
		*ei++
	}
	var used []span
	for j := *ei; j < len(c.extents) && c.extents[j].start < end; j++ {
		used = append(used, span{c.extents[j].start, c.extents[j].length})
	}
	return used
}

// freeRuns returns [start, end) minus used, as merged runs.
func freeRuns(start, end disk.LogicalAddr, used []span) []span {
	sort.Slice(used, func(i, j int) bool { return used[i].start < used[j].start })
	var out []span
	pos := start
	for _, u := range used {
		if u.start > pos {
			out = appendMerged(out, span{pos, uint64(min(u.start, end) - pos)})
		}
		if u.end() > pos {
			pos = u.end()
		}
		if pos >= end {
			break
		}
	}
	if pos < end {
		out = appendMerged(out, span{pos, uint64(end - pos)})
	}
	return out
}

func equalRuns(a, b []span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func total(runs []span) uint64 {
	var n uint64
	for _, r := range runs {
		n += r.len
	}
	return n
}
