package txn

import (
	"fmt"
	"slices"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// shrinkHeadroom is how many tree blocks a cut METADATA or SYSTEM chunk
// keeps free past its last used byte: the commit after the cut still
// copies a few blocks (chunk and dev tree paths, extent items of the new
// blocks), and with no room left they would need a new chunk.
const shrinkHeadroom = 16

// shrinkState records what Shrink changed in a transaction, for the
// superblock of the commit and for Abort.
type shrinkState struct {
	// orig holds the committed item of every committed chunk Shrink cut
	// or removed, to restore the chunk map on Abort.
	orig map[disk.LogicalAddr]disk.ChunkItem
	// items is the current item of every committed chunk changed; nil
	// means removed. The sys_chunk_array is rewritten from it.
	items map[disk.LogicalAddr]*disk.ChunkItem
	// dev is the device shrunk and total its new size; freed is, per
	// device, the bytes no longer in dev extents (its bytes_used drops
	// by them: a removed RAID chunk frees stripes on other devices too).
	dev   disk.DevID
	total uint64
	freed map[disk.DevID]uint64
}

// newShrinkState starts the record of a shrink of dev.
func (t *Txn) newShrinkState(dev disk.DevID) *shrinkState {
	return &shrinkState{orig: map[disk.LogicalAddr]disk.ChunkItem{}, items: map[disk.LogicalAddr]*disk.ChunkItem{},
		dev: dev, total: t.fs.set.Members[dev].Super.DevItem.TotalBytes, freed: map[disk.DevID]uint64{}}
}

// freedBy adds to freed the device bytes cut c frees on each device:
// every stripe loses the same length (the stripe length of SINGLE, DUP
// and RAID1* chunks is their length; other profiles are only removed).
func freedBy(c shrinkCut, freed map[disk.DevID]uint64) {
	for _, s := range c.old.Stripes {
		freed[s.DevID] += c.oldStripe - c.newLen
	}
}

// shrinkCut is one chunk change: newLen 0 removes the chunk.
type shrinkCut struct {
	logical   disk.LogicalAddr
	old       disk.ChunkItem
	oldStripe uint64
	newLen    uint64
	// relocated marks a group emptied (or cut past newLen) by
	// relocation: bytes freed in the part that goes may still be pinned,
	// and go with it (alloc.DropGroup, alloc.CutRelocated).
	relocated bool
}

// Shrink makes a single-device filesystem as small as it can be without
// moving anything. Repeatedly, the chunk whose stripes all lie after every
// other chunk's stripes on the device (the chunk ending the device) is
// removed if it holds nothing and another chunk of its type remains, or
// else cut to end at its last used byte (plus a little headroom for tree
// blocks in METADATA and SYSTEM chunks) rounded up to 64 KiB, never below
// 1 MiB; cutting ends the loop. Only SINGLE and DUP chunks are cut (a DUP
// chunk's two stripes shrink equally; the tail of its first stripe
// becomes a hole). A cut changes the CHUNK_ITEM length, each DEV_EXTENT
// length, re-keys the BLOCK_GROUP_ITEM and FREE_SPACE_INFO (whose extents
// past the new end go), and updates the chunk map and the free-space
// model; a removal deletes those items. The device's DEV_ITEM (chunk
// tree) and the superblock's dev_item lose the freed bytes from
// bytes_used, and their total_bytes and the superblock's total_bytes
// become the end of the last remaining dev extent, which Shrink returns.
//
// Shrink must be the last change of the transaction: it settles the
// bookkeeping first (so that the blocks the commit copies are already
// placed), which ends the transaction's data calls (AllocData, WriteData,
// AddDataRef fail afterwards). The caller commits and then truncates the
// device (image file) to the returned size; the superblock copies past it
// (at 64 MiB and 256 GiB) are simply gone, as after mkfs.btrfs --shrink.
// On an error the caller aborts the transaction. Calling Shrink again
// (in the same or a later transaction) cuts at most the headroom left by
// the first call.
func (t *Txn) Shrink() (uint64, error) {
	if t.done {
		return 0, fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	if err := t.loadAllSpace(); err != nil {
		return 0, fmt.Errorf("shrink: %w", err)
	}
	dev, err := t.singleDevice()
	if err != nil {
		return 0, err
	}
	if err := t.settle(); err != nil {
		return 0, fmt.Errorf("shrink: settle before: %w", err)
	}
	g, err := t.startGrowth()
	if err != nil {
		return 0, fmt.Errorf("shrink: %w", err)
	}
	if g.grown != nil {
		return 0, fmt.Errorf("shrink: %w: growing and shrinking in one transaction", ErrUnsupported)
	}
	if g.shrunk == nil {
		g.shrunk = t.newShrinkState(dev)
	}
	cuts, err := t.planShrink(g, dev)
	if err != nil {
		return 0, fmt.Errorf("shrink: %w", err)
	}
	end := t.deviceEnd(dev)
	g.free[dev].Remove(end, ^uint64(0)) // chunks made from now on stay below the end
	freed := map[disk.DevID]uint64{}
	for _, c := range cuts {
		if err := t.applyCut(c); err != nil {
			return 0, fmt.Errorf("shrink: chunk %d: %w", c.logical, err)
		}
		freedBy(c, freed)
	}
	if len(cuts) > 0 || end != g.shrunk.total {
		if err := t.shrinkDevItems(dev, freed, end); err != nil {
			return 0, fmt.Errorf("shrink: %w", err)
		}
		g.shrunk.addFreed(freed)
		g.shrunk.total = end
	}
	if err := t.settle(); err != nil {
		return 0, fmt.Errorf("shrink: settle after: %w", err)
	}
	if after := t.deviceEnd(dev); after > end {
		return 0, fmt.Errorf("shrink: a chunk made while settling ends at %d, past the new end %d", after, end)
	}
	return end, nil
}

// singleDevice returns the only device of the filesystem.
func (t *Txn) singleDevice() (disk.DevID, error) {
	if len(t.fs.set.Members) != 1 || t.fs.sb.NumDevices != 1 {
		return 0, fmt.Errorf("%w: shrinking a filesystem of %d devices", ErrUnsupported, t.fs.sb.NumDevices)
	}
	for id := range t.fs.set.Members {
		return id, nil
	}
	return 0, fmt.Errorf("%w: no device", ErrUnsupported)
}

// deviceEnd is the end of the last stripe on dev, at least the reserved
// first MiB.
func (t *Txn) deviceEnd(dev disk.DevID) uint64 {
	end := uint64(devReserved)
	for c := range t.fs.chunks.All() {
		for k := 0; k < c.NumStripes(); k++ {
			if s := c.Stripe(k); s.DevID == dev {
				end = max(end, uint64(s.Offset)+c.StripeSize())
			}
		}
	}
	return end
}

// lastChunk returns the chunk ending device dev, or nil when the stripe
// ending the device belongs to a chunk with another chunk's stripe after
// one of its own stripes (then nothing can be cut without moving data).
func (t *Txn) lastChunk(dev disk.DevID) *chunk.Chunk {
	var last *chunk.Chunk
	var lastEnd uint64
	for c := range t.fs.chunks.All() {
		for k := 0; k < c.NumStripes(); k++ {
			if s := c.Stripe(k); s.DevID == dev && uint64(s.Offset)+c.StripeSize() > lastEnd {
				last, lastEnd = c, uint64(s.Offset)+c.StripeSize()
			}
		}
	}
	if last == nil {
		return nil
	}
	first := ^uint64(0)
	for k := 0; k < last.NumStripes(); k++ {
		first = min(first, uint64(last.Stripe(k).Offset))
	}
	for c := range t.fs.chunks.All() {
		if c == last {
			continue
		}
		for k := 0; k < c.NumStripes(); k++ {
			if s := c.Stripe(k); s.DevID == dev && uint64(s.Offset)+c.StripeSize() > first {
				return nil
			}
		}
	}
	return last
}

// planShrink picks the cuts, chunk by chunk from the end of the device,
// and applies each to the chunk map, the free-space model and the
// transaction's chunk records at once (so the next chunk is judged
// against the new layout and nothing is allocated in a cut range).
func (t *Txn) planShrink(g *growth, dev disk.DevID) ([]shrinkCut, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cuts []shrinkCut
	for {
		c := t.lastChunk(dev)
		if c == nil || (c.Profile() != chunk.Single && c.Profile() != chunk.DUP) {
			return cuts, nil
		}
		grp := t.fs.space.Group(uint64(c.Logical()))
		if grp == nil || grp.Start != uint64(c.Logical()) || grp.Length != c.Length() {
			return cuts, disk.Corruptf("chunk %d: no block group of the same range", c.Logical())
		}
		used := t.fs.space.UsedEnd(grp) - grp.Start
		cut := shrinkCut{logical: c.Logical(), old: c.Item(), oldStripe: c.StripeSize()}
		if used != 0 || !t.removable(c) {
			room := uint64(0)
			if c.Type()&(disk.BlockGroupMetadata|disk.BlockGroupSystem) != 0 {
				room = shrinkHeadroom * uint64(t.fs.sb.NodeSize)
			}
			cut.newLen = max(minStripe, (used+room+chunkAlign-1)/chunkAlign*chunkAlign)
			if cut.newLen >= c.Length() {
				return cuts, nil
			}
		}
		if err := t.cutInMemory(g, cut); err != nil {
			return cuts, err
		}
		cuts = append(cuts, cut)
		if cut.newLen != 0 {
			return cuts, nil
		}
	}
}

// removable reports whether c may go entirely: another chunk of its type
// must remain, so new chunks of the type keep their profile.
func (t *Txn) removable(c *chunk.Chunk) bool {
	typ := c.Type() & disk.BlockGroupTypeMask
	for o := range t.fs.chunks.All() {
		if o != c && o.Type()&disk.BlockGroupTypeMask == typ {
			return true
		}
	}
	return false
}

// cutInMemory applies cut to the chunk map, the free-space model, the
// touched groups and the record of chunks (new or committed). t.mu held.
// A committed chunk's item is recorded before anything changes, so Abort
// can restore the map whatever step fails.
func (t *Txn) cutInMemory(g *growth, cut shrinkCut) error {
	start := uint64(cut.logical)
	item := cut.old
	item.Length = cut.newLen
	fresh := -1 // index in g.chunks of a chunk made in this transaction
	for i, nc := range g.chunks {
		if nc.logical == cut.logical {
			fresh = i
		}
	}
	if s := g.shrunk; fresh < 0 {
		if _, ok := s.orig[cut.logical]; !ok {
			s.orig[cut.logical] = cut.old
		}
		s.items[cut.logical] = nil
		if cut.newLen != 0 {
			s.items[cut.logical] = &item
		}
	}
	var err error
	switch {
	case cut.relocated && cut.newLen == 0:
		err = t.fs.space.DropGroup(start)
	case cut.relocated:
		err = t.fs.space.CutRelocated(start, cut.newLen)
	case cut.newLen == 0:
		err = t.fs.space.RemoveGroup(start)
	default:
		err = t.fs.space.ShrinkGroup(start, cut.newLen)
	}
	if err != nil {
		return err
	}
	t.fs.chunks.Remove(cut.logical)
	if cut.newLen != 0 {
		if err := t.fs.chunks.Add(cut.logical, &item); err != nil {
			return fmt.Errorf("cut chunk %d: %w", cut.logical, err)
		}
	}
	delete(t.touched, start)
	if cut.newLen != 0 {
		t.touch(start) // settleBlockGroups and settleFST rewrite the re-keyed items
	}
	t.changes++
	switch {
	case fresh >= 0 && cut.newLen == 0:
		g.chunks = append(g.chunks[:fresh], g.chunks[fresh+1:]...)
	case fresh >= 0:
		g.chunks[fresh].item.Length, g.chunks[fresh].stripe = cut.newLen, cut.newLen
	}
	return nil
}

// applyCut changes the tree items of one cut or removed chunk: CHUNK_ITEM,
// DEV_EXTENTs, BLOCK_GROUP_ITEM and the free-space tree entry. The group
// is already cut in the free-space model, so the blocks these edits copy
// land below the new end.
func (t *Txn) applyCut(c shrinkCut) error {
	ct, err := t.Tree(disk.ChunkTreeObjectID)
	if err != nil {
		return err
	}
	key := disk.Key{ObjectID: disk.FirstChunkTreeObjectID, Type: disk.ChunkItemKey, Offset: uint64(c.logical)}
	if c.newLen == 0 {
		err = deleteOne(ct.DeleteItem(t.tx, key))
	} else {
		err = ct.UpdateItem(t.tx, key, func(b []byte) error {
			var it disk.ChunkItem
			if err := it.Decode(b); err != nil {
				return err
			}
			it.Length = c.newLen
			it.Encode(b)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("chunk item: %w", err)
	}
	if err := t.cutDevExtents(c); err != nil {
		return err
	}
	if err := t.rekeyBlockGroup(c); err != nil {
		return err
	}
	return t.rekeyFST(c)
}

// deleteOne turns a DeleteItem result into an error when nothing was
// there: the item the cut changes must exist.
func deleteOne(found bool, err error) error {
	if err == nil && !found {
		return disk.Corruptf("item to delete is missing")
	}
	return err
}

// cutDevExtents shortens or deletes the DEV_EXTENT of every stripe.
func (t *Txn) cutDevExtents(c shrinkCut) error {
	dt, err := t.Tree(disk.DevTreeObjectID)
	if err != nil {
		return err
	}
	stripe := c.newLen // SINGLE and DUP stripes are the whole chunk
	for _, s := range c.old.Stripes {
		k := disk.Key{ObjectID: disk.ObjectID(s.DevID), Type: disk.DevExtentKey, Offset: uint64(s.Offset)}
		if c.newLen == 0 {
			err = deleteOne(dt.DeleteItem(t.tx, k))
		} else {
			err = dt.UpdateItem(t.tx, k, func(b []byte) error {
				var de disk.DevExtent
				if err := de.Decode(b); err != nil {
					return err
				}
				if de.ChunkOffset != c.logical || de.Length != c.oldStripe {
					return disk.Corruptf("dev extent %v: chunk %d length %d, want chunk %d length %d",
						k, de.ChunkOffset, de.Length, c.logical, c.oldStripe)
				}
				de.Length = stripe
				de.Encode(b)
				return nil
			})
		}
		if err != nil {
			return fmt.Errorf("dev extent %v: %w", k, err)
		}
	}
	return nil
}

// rekeyBlockGroup deletes the BLOCK_GROUP_ITEM and, for a cut, inserts it
// again under the new length (used and flags unchanged; the settle step
// keeps used right).
func (t *Txn) rekeyBlockGroup(c shrinkCut) error {
	bt, err := t.Tree(t.fs.bgTree)
	if err != nil {
		return err
	}
	key := disk.Key{ObjectID: disk.ObjectID(c.logical), Type: disk.BlockGroupItemKey, Offset: c.old.Length}
	data, found, err := bt.Lookup(t.tx, key)
	if err != nil {
		return err
	}
	if !found {
		return disk.Corruptf("no block group item %v", key)
	}
	data = append([]byte(nil), data...)
	if err := deleteOne(bt.DeleteItem(t.tx, key)); err != nil {
		return fmt.Errorf("block group item %v: %w", key, err)
	}
	if c.newLen == 0 {
		return nil
	}
	key.Offset = c.newLen
	if err := bt.InsertItem(t.tx, key, data); err != nil {
		return fmt.Errorf("block group item %v: %w", key, err)
	}
	return nil
}

// rekeyFST deletes the group's free-space tree entry and, for a cut,
// inserts an empty FREE_SPACE_INFO under the new length: the group is
// touched, so settleFST fills in its extents and count.
func (t *Txn) rekeyFST(c shrinkCut) error {
	if !t.keepsFST() {
		return nil
	}
	ft, err := t.Tree(disk.FreeSpaceTreeObjectID)
	if err != nil {
		return err
	}
	old := &alloc.BlockGroup{Start: uint64(c.logical), Length: c.old.Length}
	if err := deleteOne(ft.DeleteItem(t.tx, infoKey(old))); err != nil {
		return fmt.Errorf("free space info %v: %w", infoKey(old), err)
	}
	start, end := groupFSTRange(old)
	if _, err := ft.DeleteRange(t.tx, start, end); err != nil {
		return fmt.Errorf("free space of group %d: %w", c.logical, err)
	}
	if c.newLen == 0 {
		return nil
	}
	var info disk.FreeSpaceInfo
	buf := make([]byte, info.Size())
	info.Encode(buf)
	k := infoKey(&alloc.BlockGroup{Start: uint64(c.logical), Length: c.newLen})
	if err := ft.InsertItem(t.tx, k, buf); err != nil {
		return fmt.Errorf("free space info %v: %w", k, err)
	}
	return nil
}

// addFreed adds freed to the bytes s records as freed per device.
func (s *shrinkState) addFreed(freed map[disk.DevID]uint64) {
	for id, n := range freed {
		s.freed[id] += n
	}
}

// shrinkDevItems lowers bytes_used of each device's DEV_ITEM by what
// freed gives it, and sets total_bytes of dev's to total.
func (t *Txn) shrinkDevItems(dev disk.DevID, freed map[disk.DevID]uint64, total uint64) error {
	ct, err := t.Tree(disk.ChunkTreeObjectID)
	if err != nil {
		return err
	}
	ids := []disk.DevID{dev}
	for id := range freed {
		if id != dev {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids[1:]) // the same tree edits in the same order every time
	for _, id := range ids {
		k := disk.Key{ObjectID: disk.DevItemsObjectID, Type: disk.DevItemKey, Offset: uint64(id)}
		err = ct.UpdateItem(t.tx, k, func(b []byte) error {
			var d disk.DevItem
			if err := d.Decode(b); err != nil {
				return err
			}
			size := d.TotalBytes
			if id == dev {
				size = total
			}
			if d.BytesUsed < freed[id] || d.BytesUsed-freed[id] > size {
				return disk.Corruptf("dev item %d: bytes_used %d, freeing %d, size %d", id, d.BytesUsed, freed[id], size)
			}
			d.BytesUsed -= freed[id]
			d.TotalBytes = size
			d.Encode(b)
			return nil
		})
		if err != nil {
			return fmt.Errorf("dev item %d: %w", id, err)
		}
	}
	return nil
}

// shrinkSuper records a Shrink of this transaction in sb: total_bytes,
// the dev_item's size and bytes_used, and the sys_chunk_array without the
// removed SYSTEM chunks and with the cut ones' new lengths. It runs before
// growSuper appends the SYSTEM chunks made in this transaction.
func (t *Txn) shrinkSuper(sb *disk.Superblock) error {
	g := t.growthOf()
	if g == nil {
		return nil
	}
	t.growSizesSuper(g, sb)
	if g.shrunk == nil {
		return nil
	}
	s := g.shrunk
	// As the kernel: the filesystem's total loses what the device did.
	sb.TotalBytes -= t.fs.set.Members[s.dev].Super.DevItem.TotalBytes - s.total
	if sb.DevItem.DevID == s.dev {
		sb.DevItem.TotalBytes = s.total
	}
	sb.DevItem.BytesUsed -= s.freed[sb.DevItem.DevID] // growSuper adds the new chunks' bytes (counted in freed if cut)
	sys, err := sb.SysChunks()
	if err != nil {
		return err
	}
	var arr [disk.SysChunkArrayMax]byte
	n := 0
	for _, e := range sys {
		it := &e.Chunk
		if cur, changed := s.items[disk.LogicalAddr(e.Key.Offset)]; changed {
			if cur == nil {
				continue
			}
			it = cur
		}
		e.Key.Encode(arr[n:])
		it.Encode(arr[n+disk.KeySize:])
		n += disk.KeySize + it.Size()
	}
	sb.SysChunkArray, sb.SysChunkArraySize = arr, uint32(n)
	return nil
}

// shrinkDevices sets the size and bytes_used of the device's own
// superblock dev_item (which writeSupers copies), once nothing can abort
// the commit; growDevices then adds the new chunks.
func (t *Txn) shrinkDevices(g *growth) {
	t.growSizesDevices(g)
	if g.shrunk == nil {
		return
	}
	seen := map[*disk.Superblock]bool{}
	for _, m := range t.fs.set.Members {
		if seen[m.Super] {
			continue
		}
		seen[m.Super] = true
		d := &m.Super.DevItem
		if d.DevID == g.shrunk.dev {
			d.TotalBytes = g.shrunk.total
		}
		d.BytesUsed -= g.shrunk.freed[d.DevID]
	}
}

// undoShrink puts the committed items of the chunks Shrink changed back
// into the chunk map, after the transaction's new chunks left it.
func (t *Txn) undoShrink(g *growth) {
	if g.shrunk == nil {
		return
	}
	for l, it := range g.shrunk.orig {
		t.fs.chunks.Remove(l)
		if err := t.fs.chunks.Add(l, &it); err != nil {
			t.fs.setBroken(fmt.Errorf("txn: restoring chunk %d after abort: %w", l, err))
		}
	}
}
