package check

import (
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// extentRec is one extent item of the extent tree.
type extentRec struct {
	start  disk.LogicalAddr
	length uint64
	meta   bool
}

func (e extentRec) end() disk.LogicalAddr { return e.start + disk.LogicalAddr(e.length) }

// bgRec is one block group item.
type bgRec struct {
	start  disk.LogicalAddr
	length uint64
	item   disk.BlockGroupItem
}

// extentState is the extent item being compared, with its keyed refs.
type extentState struct {
	rec   extentRec
	key   disk.Key
	item  disk.ExtentItem
	keyed []disk.InlineRef // keyed backrefs, in the inline form
	bad   bool             // undecodable: counts are not compared
}

// checkExtents walks every tree, then compares the references found with
// the extent tree's items, block groups with chunks and extents, and
// device extents with chunks.
func (c *checker) checkExtents() error {
	if err := c.walkTrees(); err != nil {
		return err
	}
	c.dataJoin = &dataJoin{cur: c.newDataCursor(true)}
	if err := c.readExtentTree(); err != nil {
		return err
	}
	if err := c.dataJoin.finish(); err != nil {
		return err
	}
	c.checkUnbacked()
	c.checkBlockGroups()
	c.checkDevExtents()
	return nil
}

// readExtentTree reads the extent tree in key order: extent items with
// their keyed backrefs (which sort right after them), and block groups.
func (c *checker) readExtentTree() error {
	t, ok := c.tree(disk.ExtentTreeObjectID)
	if !ok {
		c.problemf(KindRootItem, disk.ExtentTreeObjectID, 0, nil, "extent tree root item missing")
		return nil
	}
	var cur *extentState
	var prevEnd disk.LogicalAddr
	flush := func() {
		if cur != nil {
			c.compareExtent(cur)
			cur = nil
		}
	}
	err := c.forEachItem(t, func(k disk.Key, data []byte, leaf disk.Node) error {
		kk := k
		switch k.Type {
		case disk.ExtentItemKey, disk.MetadataItemKey:
			flush()
			cur = &extentState{key: k, rec: extentRec{start: disk.LogicalAddr(k.ObjectID), length: k.Offset}}
			if err := cur.item.DecodeAs(k.Type, data); err != nil {
				c.problemf(KindItem, disk.ExtentTreeObjectID, leaf.Bytenr(), &kk, "extent item %v: %v", k, err)
				cur.bad = true
			}
			if k.Type == disk.MetadataItemKey {
				cur.rec.length = uint64(c.params.NodeSize)
				cur.rec.meta = true
			} else if cur.item.Flags&disk.ExtentFlagTreeBlock != 0 {
				cur.rec.meta = true
			}
			if cur.rec.start < prevEnd {
				c.problemf(KindExtentRef, disk.ExtentTreeObjectID, cur.rec.start, &kk,
					"extent [%d %d] overlaps the extent before it, which ends at %d", cur.rec.start, cur.rec.length, prevEnd)
			}
			if e := cur.rec.end(); e > prevEnd {
				prevEnd = e
			}
			c.extents = append(c.extents, cur.rec)
			c.report.Summary.BytesUsed += cur.rec.length
		case disk.TreeBlockRefKey, disk.SharedBlockRefKey, disk.ExtentDataRefKey, disk.SharedDataRefKey, disk.ExtentOwnerRefKey:
			if cur == nil || disk.LogicalAddr(k.ObjectID) != cur.rec.start {
				c.problemf(KindExtentRef, disk.ExtentTreeObjectID, disk.LogicalAddr(k.ObjectID), &kk,
					"backref %v has no extent item", k)
				return nil
			}
			r := disk.InlineRef{Type: k.Type, Offset: k.Offset}
			switch k.Type {
			case disk.ExtentDataRefKey:
				var refs disk.ExtentDataRefs
				if err := refs.Decode(data); err != nil {
					c.problemf(KindItem, disk.ExtentTreeObjectID, leaf.Bytenr(), &kk, "extent data ref %v: %v", k, err)
					cur.bad = true
					return nil
				}
				for _, dr := range refs {
					cur.keyed = append(cur.keyed, disk.InlineRef{Type: k.Type, Data: dr})
				}
				return nil
			case disk.SharedDataRefKey:
				var sr disk.SharedDataRef
				if err := sr.Decode(data); err != nil {
					c.problemf(KindItem, disk.ExtentTreeObjectID, leaf.Bytenr(), &kk, "shared data ref %v: %v", k, err)
					cur.bad = true
					return nil
				}
				r.Count = sr.Count
			}
			cur.keyed = append(cur.keyed, r)
		case disk.BlockGroupItemKey:
			c.addBlockGroup(k, data, leaf)
		}
		return nil
	})
	flush()
	if err != nil {
		return err
	}
	if bgt, ok := c.tree(disk.BlockGroupTreeObjectID); ok {
		err = c.forEachItem(bgt, func(k disk.Key, data []byte, leaf disk.Node) error {
			if k.Type == disk.BlockGroupItemKey {
				c.addBlockGroup(k, data, leaf)
			}
			return nil
		})
	}
	if c.report.Summary.BytesUsed != c.sb.BytesUsed {
		c.problemf(KindSuperblock, 0, 0, nil, "super bytes used %d mismatches actual used %d", c.sb.BytesUsed, c.report.Summary.BytesUsed)
	}
	return err
}

func (c *checker) addBlockGroup(k disk.Key, data []byte, leaf disk.Node) {
	var bg disk.BlockGroupItem
	if err := bg.Decode(data); err != nil {
		kk := k
		c.problemf(KindItem, leaf.Owner(), leaf.Bytenr(), &kk, "block group item %v: %v", k, err)
		return
	}
	c.bgs = append(c.bgs, bgRec{start: disk.LogicalAddr(k.ObjectID), length: k.Offset, item: bg})
}

// allRefs returns the inline and keyed backrefs of an extent.
func (s *extentState) allRefs() []disk.InlineRef {
	out := make([]disk.InlineRef, 0, len(s.item.InlineRefs)+len(s.keyed))
	out = append(out, s.item.InlineRefs...)
	return append(out, s.keyed...)
}

// compareExtent checks one extent item against the references found.
func (c *checker) compareExtent(s *extentState) {
	start, length := s.rec.start, s.rec.length
	refs := s.allRefs()
	var backrefs uint64
	for i := range refs {
		backrefs += refs[i].RefCount()
	}
	if s.rec.meta {
		rec := c.blocks[start]
		var found uint64
		if rec != nil {
			rec.hasExtent = true
			found = rec.refs()
		}
		if s.bad {
			return
		}
		if found != s.item.Refs {
			c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "ref mismatch on [%d %d] extent item %d, found %d", start, length, s.item.Refs, found)
		}
		if backrefs != s.item.Refs {
			c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "backpointer mismatch on [%d %d]: extent item refs %d, backrefs %d", start, length, s.item.Refs, backrefs)
		}
		if rec == nil {
			return
		}
		valid := map[disk.ObjectID]bool{rec.owner: true}
		for _, r := range rec.roots {
			valid[r] = true
		}
		parents := map[disk.LogicalAddr]bool{}
		for _, p := range rec.parents {
			parents[p] = true
			if pr := c.blocks[p]; pr != nil {
				valid[pr.owner] = true
			}
		}
		for _, r := range refs {
			switch r.Type {
			case disk.TreeBlockRefKey:
				if !valid[disk.ObjectID(r.Offset)] {
					c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "tree backref %d root %d not found in extent tree walk", start, r.Offset)
				}
			case disk.SharedBlockRefKey:
				// A root block with a full backref names itself as the
				// parent of its root item's reference.
				self := disk.LogicalAddr(r.Offset) == start && len(rec.roots) > 0
				if !parents[disk.LogicalAddr(r.Offset)] && !self {
					c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "tree backref %d parent %d not found in extent tree walk", start, r.Offset)
				}
			case disk.ExtentDataRefKey, disk.SharedDataRefKey:
				c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "tree block extent %d has a data backref", start)
			}
		}
		return
	}
	rec := c.dataJoin.at(c, start)
	var found uint64
	if rec != nil {
		found = uint64(len(rec.refs))
		if rec.diskLen != length {
			c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "file extent points at [%d %d] but the extent item is [%d %d]", start, rec.diskLen, start, length)
		}
	}
	if s.bad {
		return
	}
	if found != s.item.Refs {
		c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "ref mismatch on [%d %d] extent item %d, found %d", start, length, s.item.Refs, found)
	}
	if backrefs != s.item.Refs {
		c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "backpointer mismatch on [%d %d]: extent item refs %d, backrefs %d", start, length, s.item.Refs, backrefs)
	}
	if rec == nil {
		return
	}
	type triple struct {
		root, ino disk.ObjectID
		off       uint64
	}
	shared := map[disk.LogicalAddr]uint64{}
	for _, r := range refs {
		if r.Type == disk.SharedDataRefKey {
			shared[disk.LogicalAddr(r.Offset)] += uint64(r.Count)
		}
	}
	inLeaf := map[disk.LogicalAddr]uint64{}
	byTriple := map[triple]uint64{}
	for _, d := range rec.refs {
		if _, ok := shared[d.leaf]; ok {
			inLeaf[d.leaf]++
			continue
		}
		byTriple[triple{d.root, d.ino, d.off}]++
	}
	for leaf, n := range shared {
		if inLeaf[leaf] != n {
			c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil, "shared data backref [%d %d] parent %d count %d, found %d", start, length, leaf, n, inLeaf[leaf])
		}
	}
	declared := map[triple]uint64{}
	for _, r := range refs {
		if r.Type == disk.ExtentDataRefKey {
			declared[triple{r.Data.Root, r.Data.ObjectID, r.Data.Offset}] += uint64(r.Data.Count)
		}
	}
	keys := make([]triple, 0, len(declared)+len(byTriple))
	for t := range declared {
		keys = append(keys, t)
	}
	for t := range byTriple {
		if _, ok := declared[t]; !ok {
			keys = append(keys, t)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.root != b.root {
			return a.root < b.root
		}
		if a.ino != b.ino {
			return a.ino < b.ino
		}
		return a.off < b.off
	})
	for _, t := range keys {
		if declared[t] != byTriple[t] {
			c.problemf(KindExtentRef, disk.ExtentTreeObjectID, start, nil,
				"data backref [%d %d] root %d owner %d offset %d num_refs %d, found %d", start, length, t.root, t.ino, t.off, declared[t], byTriple[t])
		}
	}
}

// checkUnbacked reports tree blocks and data extents referenced by the
// trees but missing from the extent tree.
func (c *checker) checkUnbacked() {
	addrs := make([]disk.LogicalAddr, 0)
	for a, r := range c.blocks {
		if r.visited && !r.hasExtent {
			addrs = append(addrs, a)
		}
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for _, a := range addrs {
		r := c.blocks[a]
		c.problemf(KindExtentRef, r.owner, a, nil, "ref mismatch on [%d %d] extent item 0, found %d", a, c.params.NodeSize, r.refs())
	}
	un := c.dataJoin.unbacked
	sort.SliceStable(un, func(i, j int) bool { return un[i].bytenr < un[j].bytenr })
	for _, g := range un {
		c.problemf(KindExtentRef, g.rec.refs[0].root, g.bytenr, nil, "ref mismatch on [%d %d] extent item 0, found %d", g.bytenr, g.rec.diskLen, len(g.rec.refs))
	}
	c.dataJoin = nil
}

// checkBlockGroups compares block groups with chunks and with the extents
// inside them.
func (c *checker) checkBlockGroups() {
	sort.Slice(c.bgs, func(i, j int) bool { return c.bgs[i].start < c.bgs[j].start })
	have := map[disk.LogicalAddr]bool{}
	for _, bg := range c.bgs {
		have[bg.start] = true
		ch, err := c.m.Lookup(bg.start)
		if err != nil || ch.Logical() != bg.start || ch.Length() != bg.length {
			c.problemf(KindBlockGroup, disk.ExtentTreeObjectID, bg.start, nil, "block group [%d %d] has no matching chunk", bg.start, bg.length)
			continue
		}
		if ch.Type() != bg.item.Flags {
			c.problemf(KindBlockGroup, disk.ExtentTreeObjectID, bg.start, nil, "block group [%d %d] type %#x differs from its chunk's %#x", bg.start, bg.length, bg.item.Flags, ch.Type())
		}
	}
	for ch := range c.m.All() {
		if !have[ch.Logical()] {
			c.problemf(KindBlockGroup, disk.ChunkTreeObjectID, ch.Logical(), nil, "chunk [%d %d] has no block group", ch.Logical(), ch.Length())
		}
	}
	// c.extents is in start order; sum each group's share.
	i := 0
	for _, bg := range c.bgs {
		end := bg.start + disk.LogicalAddr(bg.length)
		for i < len(c.extents) && c.extents[i].start < bg.start {
			i++
		}
		var used uint64
		for j := i; j < len(c.extents) && c.extents[j].start < end; j++ {
			e := c.extents[j]
			used += e.length
			isData := bg.item.Flags&disk.BlockGroupData != 0
			isMeta := bg.item.Flags&(disk.BlockGroupMetadata|disk.BlockGroupSystem) != 0
			if (e.meta && !isMeta) || (!e.meta && !isData) || e.end() > end {
				c.problemf(KindBlockGroup, disk.ExtentTreeObjectID, e.start, nil, "extent [%d %d] does not fit block group [%d %d] type %#x", e.start, e.length, bg.start, bg.length, bg.item.Flags)
			}
		}
		if used != bg.item.Used {
			c.problemf(KindBlockGroup, disk.ExtentTreeObjectID, bg.start, nil, "block group [%d %d] used %d but extent items used %d", bg.start, bg.length, bg.item.Used, used)
		}
	}
}
