package txn

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Relocation empties block groups so that their chunks can go, as the
// kernel's balance does, but in the one transaction that also removes the
// chunks (the kernel commits between its stages): the groups are made
// read-only to the allocator, every data extent in them is copied to a
// new extent and every file extent item pointing at it rewritten (with
// its checksums copied and its back references moved), and every tree
// block in them is copied on write by a search down to it. What the
// commit frees there is pinned in groups that no longer exist after it;
// the old blocks stay on disk until the commit is durable (nothing is
// written over them: the groups take no allocations), so a failed commit
// leaves the last one whole.
//
// Only extents with one owner per reference can move this way: a tree
// block shared between roots (snapshots) or a data extent referenced by
// parent block (SHARED_DATA_REF, FULL_BACKREF) is refused before anything
// changes.

// ErrShared is returned (wrapping ErrUnsupported) when a group to empty
// holds a shared tree block or data extent.
var ErrShared = fmt.Errorf("%w: shared tree blocks or data (snapshots) in a chunk that would have to move", ErrUnsupported)

// relocExtent is one extent in a group being emptied, from its extent item.
type relocExtent struct {
	start, length uint64
	data          bool
	refs          uint64
	dataRefs      []disk.ExtentDataRef // data: inline and keyed EXTENT_DATA_REFs
}

// groupExtents lists the extents of the running extent tree in
// [start, end), refusing shared ones.
func (t *Txn) groupExtents(start, end uint64) ([]*relocExtent, error) {
	et, err := t.Tree(disk.ExtentTreeObjectID)
	if err != nil {
		return nil, err
	}
	var out []*relocExtent
	byStart := map[uint64]*relocExtent{}
	from := disk.Key{ObjectID: disk.ObjectID(start)}
	to := disk.Key{ObjectID: disk.ObjectID(end - 1), Type: math.MaxUint8, Offset: math.MaxUint64}
	err = et.Range(t.tx, from, to, func(k disk.Key, data []byte) (bool, error) {
		switch k.Type {
		case disk.ExtentItemKey, disk.MetadataItemKey:
			var ei disk.ExtentItem
			if err := ei.DecodeAs(k.Type, data); err != nil {
				return false, &disk.CorruptError{Tree: disk.ExtentTreeObjectID, Key: &k, What: "extent item", Err: err}
			}
			e := &relocExtent{start: uint64(k.ObjectID), length: k.Offset, refs: ei.Refs,
				data: ei.Flags&disk.ExtentFlagData != 0}
			if k.Type == disk.MetadataItemKey {
				e.length = uint64(t.fs.sb.NodeSize)
			}
			if ei.Flags&disk.ExtentFlagFullBackref != 0 || (!e.data && ei.Refs != 1) {
				return false, fmt.Errorf("extent %d: %w", k.ObjectID, ErrShared)
			}
			for _, r := range ei.InlineRefs {
				switch r.Type {
				case disk.SharedBlockRefKey, disk.SharedDataRefKey:
					return false, fmt.Errorf("extent %d: %w", k.ObjectID, ErrShared)
				case disk.ExtentDataRefKey:
					e.dataRefs = append(e.dataRefs, r.Data)
				}
			}
			out = append(out, e)
			byStart[e.start] = e
		case disk.TreeBlockRefKey, disk.SharedBlockRefKey, disk.SharedDataRefKey:
			// A tree block's reference kept as an item of its own: it
			// had many (snapshots), and moving it would leave the item.
			return false, fmt.Errorf("extent %d: %w", k.ObjectID, ErrShared)
		case disk.ExtentDataRefKey:
			e := byStart[uint64(k.ObjectID)]
			var rs disk.ExtentDataRefs
			if err := rs.Decode(data); err != nil || e == nil {
				return false, &disk.CorruptError{Tree: disk.ExtentTreeObjectID, Key: &k, What: "extent data ref without its extent item", Err: err}
			}
			e.dataRefs = append(e.dataRefs, rs...)
		}
		return true, nil
	})
	return out, err
}

// relocRange is a part of a block group to empty: from its cut point
// (from) to its end; from == Start for the whole group.
type relocRange struct {
	grp  *alloc.BlockGroup
	from uint64
}

// extents returns the extents of the running extent tree that overlap
// the range (an extent across the cut point moves whole).
func (t *Txn) extentsIn(r relocRange) ([]*relocExtent, error) {
	exts, err := t.groupExtents(r.grp.Start, r.grp.End())
	if err != nil {
		return nil, err
	}
	out := exts[:0]
	for _, e := range exts {
		if e.start+e.length > r.from {
			out = append(out, e)
		}
	}
	return out, nil
}

// relocPlan is what ShrinkTo moves: the parts of groups to empty.
type relocPlan struct {
	ranges []relocRange
	// drops are the chunks cut or removed without moving anything: past
	// the end, and empty ones below it removed for room (gone from the
	// space model and the chunk map, their items not yet from the trees:
	// ShrinkTo applies them before anything else).
	drops []shrinkCut
}

// dropEmptyBelow removes (in memory) empty chunks with no stripe on dev
// past size, until want device bytes are freed, keeping a chunk of every
// type that neither moves nor goes; their device ranges (on every device
// they use) become unallocated. t.mu held.
func (t *Txn) dropEmptyBelow(g *growth, dev disk.DevID, size uint64, moving map[uint64]bool, want uint64) []shrinkCut {
	var drops []shrinkCut
	var got uint64
	kept := func(c *chunk.Chunk, gone map[uint64]bool) bool {
		typ := c.Type() & disk.BlockGroupTypeMask
		for o := range t.fs.chunks.All() {
			if o != c && o.Type()&disk.BlockGroupTypeMask == typ && !moving[uint64(o.Logical())] && !gone[uint64(o.Logical())] {
				return true
			}
		}
		return false
	}
	gone := map[uint64]bool{}
	var cands []*chunk.Chunk
	for c := range t.fs.chunks.All() {
		cands = append(cands, c)
	}
	for _, c := range cands {
		if got >= want {
			break
		}
		if moving[uint64(c.Logical())] {
			continue
		}
		below := true
		for k := 0; k < c.NumStripes(); k++ {
			if s := c.Stripe(k); s.DevID == dev && uint64(s.Offset)+c.StripeSize() > size {
				below = false
			}
		}
		grp := t.fs.space.Group(uint64(c.Logical()))
		if !below || grp == nil || grp.Used != 0 || t.fs.space.UsedEnd(grp) != grp.Start || !kept(c, gone) {
			continue
		}
		cut := shrinkCut{logical: c.Logical(), old: c.Item(), oldStripe: c.StripeSize()}
		if err := t.cutInMemory(g, cut); err != nil {
			continue
		}
		gone[uint64(c.Logical())] = true
		for _, s := range cut.old.Stripes {
			g.free[s.DevID].Insert(uint64(s.Offset), uint64(s.Offset)+cut.oldStripe)
			got += cut.oldStripe
		}
		drops = append(drops, cut)
	}
	return drops
}

// cuttable reports whether a chunk of profile p can be cut (its stripes
// shortened alike): those whose stripes each hold the whole chunk.
func cuttable(p chunk.Profile) bool {
	switch p {
	case chunk.Single, chunk.DUP, chunk.RAID1, chunk.RAID1C3, chunk.RAID1C4:
		return true
	}
	return false
}

// planRelocation picks the groups of the chunks past size on dev that
// cannot simply be cut or dropped, checks that what they hold can move
// (no shared extents) and fits below size, and makes them read-only.
// t.mu is not held.
func (t *Txn) planRelocation(g *growth, dev disk.DevID, size uint64) (*relocPlan, error) {
	plan := &relocPlan{}
	type pastChunk struct {
		c    *chunk.Chunk
		keep uint64 // the stripe length that stays below size, 0: none
	}
	var past []pastChunk
	err := func() error {
		t.mu.Lock()
		defer t.mu.Unlock()
		var all []*chunk.Chunk
		for c := range t.fs.chunks.All() {
			all = append(all, c)
		}
		for _, c := range all {
			keep := c.StripeSize()
			onDev := false
			for k := 0; k < c.NumStripes(); k++ {
				s := c.Stripe(k)
				if s.DevID != dev {
					continue
				}
				onDev = true
				if uint64(s.Offset) >= size {
					keep = 0
				} else {
					keep = min(keep, (size-uint64(s.Offset))/chunkAlign*chunkAlign)
				}
			}
			if !onDev || keep == c.StripeSize() {
				continue
			}
			if !cuttable(c.Profile()) {
				// Striped (RAID0, RAID10, RAID5, RAID6): a stripe is
				// not the chunk's length; the chunk moves whole, as
				// the kernel moves every chunk.
				keep = 0
			}
			grp := t.fs.space.Group(uint64(c.Logical()))
			if grp == nil || grp.Start != uint64(c.Logical()) || grp.Length != c.Length() {
				return disk.Corruptf("chunk %d: no block group of the same range", c.Logical())
			}
			used := t.fs.space.UsedEnd(grp) - grp.Start
			cut := shrinkCut{logical: c.Logical(), old: c.Item(), oldStripe: c.StripeSize()}
			switch {
			case used == 0:
				// Dropped, after a replacement below the end if it is
				// the last of its type (empty, as balance leaves one).
				if !t.removable(c) {
					if err := t.growLocked(c.Type() & disk.BlockGroupTypeMask); err != nil {
						return fmt.Errorf("chunk %d past %d on device %d is the last of its type: a chunk to replace it (%d bytes a stripe at least): %w",
							c.Logical(), size, dev, minStripe, err)
					}
				}
			case keep >= minStripe && used <= keep:
				cut.newLen = keep
			default:
				past = append(past, pastChunk{c, keep})
				continue
			}
			// Cut or dropped now, before anything moves, so that nothing
			// is placed in the part that goes.
			if err := t.cutInMemory(g, cut); err != nil {
				return err
			}
			plan.drops = append(plan.drops, cut)
		}
		return nil
	}()
	if err != nil || len(past) == 0 {
		return plan, err
	}
	if err := t.checkNoSnapshots(); err != nil {
		return nil, err
	}
	// What must move, by block group type; what room the other groups
	// and the device below size have.
	need := map[uint64]uint64{}
	stripes := map[uint64]uint64{}
	moving := map[uint64]bool{}
	var dataSizes []uint64       // the data extents to move: each needs one free range
	cutAt := map[uint64]uint64{} // groups emptied past a cut point: the point
	for _, p := range past {
		c := p.c
		grp := t.fs.space.Group(uint64(c.Logical()))
		typ := c.Type() & disk.BlockGroupTypeMask
		stripes[typ] = uint64(c.NumStripes())
		r := relocRange{grp: grp, from: grp.Start}
		if p.keep >= minStripe {
			// Only what lies past the cut moves (SINGLE, DUP, RAID1*:
			// the chunk's offsets are its stripes' offsets); the
			// kernel moves whole chunks, which needs more room.
			r.from = grp.Start + p.keep
			cutAt[grp.Start] = r.from
		} else {
			moving[grp.Start] = true
		}
		plan.ranges = append(plan.ranges, r)
		exts, err := t.extentsIn(r)
		if err != nil {
			return nil, err // shared extents: refused before anything changed
		}
		for _, e := range exts {
			need[typ] += e.length
			if e.data {
				dataSizes = append(dataSizes, e.length)
			}
		}
	}
	// Largest first, as a first fit packs best.
	slices.SortFunc(dataSizes, func(a, b uint64) int { return cmp.Compare(b, a) })
	t.mu.Lock()
	defer t.mu.Unlock()
	// shortfall is how many bytes of what must move find no room: every
	// data extent (which moves whole) first fit into the free ranges of
	// the data groups that stay, then into new chunks placed as
	// growLocked would place them in the device room below size; the
	// metadata and system bytes (with room for the paths copied on the
	// way) likewise.
	shortfall := func() uint64 {
		room := map[uint64]uint64{}
		var dataFree []alloc.Extents
		for _, grp := range t.fs.space.Groups() {
			if moving[grp.Start] || grp.ReadOnly {
				continue
			}
			free := grp.Free.Clone()
			if at, ok := cutAt[grp.Start]; ok {
				free.Remove(at, grp.End())
			}
			typ := grp.Flags & disk.BlockGroupTypeMask
			room[typ] += free.Bytes()
			if typ == disk.BlockGroupData {
				dataFree = append(dataFree, free)
			}
		}
		sim := &growth{free: map[disk.DevID]*alloc.Extents{}}
		for id, e := range g.free {
			holes := e.Clone()
			sim.free[id] = &holes
		}
		// newChunk places a simulated chunk of type want, returning its
		// length (0: no room).
		newChunk := func(want uint64) uint64 {
			flags, err := t.chunkFlags(want)
			if err != nil {
				return 0
			}
			nc, err := t.planChunk(sim, flags)
			if err != nil {
				return 0
			}
			for _, st := range nc.item.Stripes {
				sim.free[st.DevID].Remove(uint64(st.Offset), uint64(st.Offset)+nc.stripe)
			}
			return nc.item.Length
		}
		var short uint64
		fit := func(size uint64) bool {
			for i := range dataFree {
				if a, ok := dataFree[i].Find(size, uint64(t.fs.sb.SectorSize), 0); ok {
					dataFree[i].Remove(a, a+size)
					return true
				}
			}
			return false
		}
		for _, size := range dataSizes {
			if fit(size) {
				continue
			}
			if n := newChunk(disk.BlockGroupData); n > 0 {
				base := uint64(1) << 62 // simulated logical space
				base += uint64(len(dataFree)) << 40
				var e alloc.Extents
				e.Insert(base, base+n)
				dataFree = append(dataFree, e)
			}
			if !fit(size) {
				short += size
			}
		}
		for typ, used := range need {
			if typ == disk.BlockGroupData {
				continue
			}
			used += 64 * uint64(t.fs.sb.NodeSize) // the paths copied on the way
			for used > room[typ] {
				n := newChunk(typ)
				if n == 0 {
					short += used - room[typ]
					break
				}
				room[typ] += n
			}
		}
		return short
	}
	if n := shortfall(); n > 0 {
		// Empty chunks below the end give their room back first, as the
		// kernel's cleaner removes unused block groups.
		plan.drops = append(plan.drops, t.dropEmptyBelow(g, dev, size, moving, n)...)
	}
	if n := shortfall(); n > 0 {
		var used uint64
		for _, n := range need {
			used += n
		}
		return nil, fmt.Errorf("%w: the %d bytes in use in the chunks past %d on device %d do not fit elsewhere (%d bytes more would be needed)",
			alloc.ErrNoSpace, used, size, dev, n)
	}
	for _, r := range plan.ranges {
		if r.from == r.grp.Start {
			r.grp.ReadOnly = true
		} else {
			r.grp.Limit = r.from
		}
	}
	return plan, nil
}

// relocateData copies every data extent of the plan's groups to a new
// extent, rewriting the file extent items that point at it.
func (t *Txn) relocateData(plan *relocPlan) error {
	for _, r := range plan.ranges {
		if r.grp.Flags&disk.BlockGroupData == 0 {
			continue
		}
		exts, err := t.extentsIn(r)
		if err != nil {
			return err
		}
		for _, e := range exts {
			if !e.data {
				continue
			}
			if err := t.moveDataExtent(e); err != nil {
				return fmt.Errorf("data extent %d: %w", e.start, err)
			}
		}
	}
	return nil
}

// moveDataExtent copies one data extent: its bytes, its checksums, and
// each reference (file extent item and back reference).
func (t *Txn) moveDataExtent(e *relocExtent) error {
	buf := make([]byte, e.length)
	if err := t.ReadData(disk.LogicalAddr(e.start), buf); err != nil {
		return err
	}
	na, err := t.AllocData(e.length, 0)
	if err != nil {
		return err
	}
	if err := t.WriteData(na, buf); err != nil {
		return err
	}
	if err := t.copyCsums(e.start, e.length, uint64(na)); err != nil {
		return fmt.Errorf("checksums: %w", err)
	}
	type owner struct{ root, ino disk.ObjectID }
	seen := map[owner]bool{}
	var moved uint64
	for _, r := range e.dataRefs {
		o := owner{r.Root, r.ObjectID}
		if seen[o] {
			continue
		}
		seen[o] = true
		n, err := t.repointFileExtents(r.Root, r.ObjectID, e, na)
		if err != nil {
			return fmt.Errorf("root %d inode %d: %w", r.Root, r.ObjectID, err)
		}
		moved += n
	}
	if moved != e.refs {
		return disk.Corruptf("data extent %d: %d references, %d file extent items point at it", e.start, e.refs, moved)
	}
	return nil
}

// copyCsums records for [to, +length) the checksums recorded for
// [from, +length) (sectors without one stay without).
func (t *Txn) copyCsums(from, length, to uint64) error {
	ct, err := t.Tree(disk.CsumTreeObjectID)
	if err != nil {
		return err
	}
	cs := uint64(t.fs.sb.CsumType.Size())
	sector := uint64(t.fs.sb.SectorSize)
	runs, err := t.csumItemsAround(ct, from, from+length)
	if err != nil {
		return err
	}
	for _, r := range runs {
		end := r.end(int(cs), sector)
		lo, hi := max(r.start, from), min(end, from+length)
		if lo >= hi {
			continue
		}
		sums := r.sums[(lo-r.start)/sector*cs : (hi-r.start)/sector*cs]
		if err := t.AddCsums(disk.LogicalAddr(to+lo-from), sums); err != nil {
			return err
		}
	}
	return nil
}

// repointFileExtents makes every file extent item of inode ino in tree
// root that points at e point at na, moving its back reference along,
// and returns how many it changed.
func (t *Txn) repointFileExtents(root, ino disk.ObjectID, e *relocExtent, na disk.LogicalAddr) (uint64, error) {
	tr, err := t.Tree(root)
	if err != nil {
		return 0, err
	}
	var keys []disk.Key
	from := disk.Key{ObjectID: ino, Type: disk.ExtentDataKey}
	to := disk.Key{ObjectID: ino, Type: disk.ExtentDataKey, Offset: math.MaxUint64}
	err = tr.Range(t.tx, from, to, func(k disk.Key, data []byte) (bool, error) {
		var fe disk.FileExtentItem
		if err := fe.Decode(data); err != nil {
			return false, &disk.CorruptError{Tree: root, Key: &k, What: "file extent item", Err: err}
		}
		if fe.Type != disk.FileExtentInline && uint64(fe.DiskBytenr) == e.start {
			keys = append(keys, k)
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		var refOffset uint64
		err := tr.UpdateItem(t.tx, k, func(b []byte) error {
			var fe disk.FileExtentItem
			if err := fe.Decode(b); err != nil {
				return err
			}
			if fe.DiskNumBytes != e.length {
				return disk.Corruptf("file extent item of %d disk bytes, its extent has %d", fe.DiskNumBytes, e.length)
			}
			refOffset = k.Offset - fe.Offset
			fe.DiskBytenr = na
			fe.Encode(b)
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("file extent item %v: %w", k, err)
		}
		if err := t.AddDataRef(na, e.length, root, ino, refOffset, 1); err != nil {
			return 0, err
		}
		if err := t.DropDataRef(disk.LogicalAddr(e.start), e.length, root, ino, refOffset, 1); err != nil {
			return 0, err
		}
	}
	return uint64(len(keys)), nil
}

// relocateTrees copies on write every tree block still in the plan's
// groups, settling after each round (which may copy more blocks, never
// into those groups), until none is left there.
func (t *Txn) relocateTrees(plan *relocPlan) error {
	tried := map[uint64]int{}
	for round := 0; ; round++ {
		var left []*relocExtent
		for _, r := range plan.ranges {
			exts, err := t.extentsIn(r)
			if err != nil {
				return err
			}
			for _, e := range exts {
				if e.data {
					return disk.Corruptf("data extent %d left in group %d after moving its data", e.start, r.grp.Start)
				}
				left = append(left, e)
			}
		}
		if len(left) == 0 {
			return nil
		}
		for _, e := range left {
			if tried[e.start]++; tried[e.start] > 2 {
				return fmt.Errorf("tree block %d: still in place after copying its path", e.start)
			}
			if err := t.cowBlockAt(disk.LogicalAddr(e.start)); err != nil {
				return fmt.Errorf("tree block %d: %w", e.start, err)
			}
		}
		if err := t.settle(); err != nil {
			return err
		}
	}
}

// cowBlockAt copies the tree block at addr on write: a search of its tree
// for its first key, stopping at its level, copies every block on the way.
func (t *Txn) cowBlockAt(addr disk.LogicalAddr) error {
	n, err := t.ReadBlock(addr, disk.Expect{Bytenr: addr, Level: -1})
	if err != nil {
		return err
	}
	owner := n.Owner()
	switch owner {
	case disk.TreeLogObjectID, disk.TreeRelocObjectID:
		return fmt.Errorf("%w: moving a block of tree %d", ErrUnsupported, owner)
	}
	tr, err := t.Tree(owner)
	if err != nil {
		return fmt.Errorf("tree %d: %w", owner, err)
	}
	var key disk.Key
	if n.NumItems() > 0 {
		if n.IsLeaf() {
			key = n.Key(0)
		} else {
			key = n.KeyPtr(0).Key
		}
	}
	p := &ctree.Path{LowestLevel: n.Level()}
	_, err = tr.Search(t.tx, p, key, 0, true)
	p.Release()
	return err
}

// checkNoSnapshots refuses a filesystem where a subvolume was ever
// snapshotted (its ROOT_ITEM's last_snapshot is set): its tree blocks
// may be shared with the snapshot, and a shared block reaches a data
// extent without the extent naming the snapshot, so moving the extent
// would leave the snapshot pointing at freed bytes.
func (t *Txn) checkNoSnapshots() error {
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	from := disk.Key{}
	to := disk.Key{ObjectID: math.MaxUint64, Type: math.MaxUint8, Offset: math.MaxUint64}
	return rt.Range(t.tx, from, to, func(k disk.Key, data []byte) (bool, error) {
		if k.Type != disk.RootItemKey || !k.ObjectID.IsFSTree() {
			return true, nil
		}
		var ri disk.RootItem
		if err := ri.Decode(data); err != nil {
			return false, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &k, What: "root item", Err: err}
		}
		if ri.LastSnapshot != 0 || ri.ParentUUID != (disk.UUID{}) {
			return false, fmt.Errorf("subvolume %d (snapshotted or a snapshot): %w", k.ObjectID, ErrShared)
		}
		return true, nil
	})
}
