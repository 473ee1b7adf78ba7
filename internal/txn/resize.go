package txn

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Grow makes device dev size bytes long, as the kernel's
// btrfs_grow_device does: the DEV_ITEM's total_bytes (chunk tree), the
// superblock's total_bytes and the device's own superblock dev_item take
// the new size at the commit, and the bytes between the old and the new
// end become unallocated device space at once, so chunks made in this
// transaction may use them. The device must already be that large (an
// image file is extended first). Superblock copies at 64 MiB and 256 GiB
// that are now inside the device are written by the commit (writeSupers
// writes every copy inside the device), and a chunk made over one keeps it
// out of its block group (chunk.SuperblockExclusions), as the kernel does.
//
// Grow and Shrink (or ShrinkTo) do not mix in one transaction.
func (t *Txn) Grow(dev disk.DevID, size uint64) error {
	if t.done {
		return fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	m := t.fs.set.Members[dev]
	if m == nil {
		return fmt.Errorf("grow: no device %d", dev)
	}
	old := t.deviceTotal(dev)
	if size < old {
		return fmt.Errorf("grow: device %d is %d bytes, more than %d", dev, old, size)
	}
	if size > uint64(m.Device.Size()) {
		return fmt.Errorf("grow: device %d (%s) holds %d bytes, fewer than %d", dev, m.Path, m.Device.Size(), size)
	}
	if size == old {
		return nil
	}
	g, err := t.startGrowth()
	if err != nil {
		return fmt.Errorf("grow: %w", err)
	}
	if g.shrunk != nil {
		return fmt.Errorf("grow: %w: growing and shrinking in one transaction", ErrUnsupported)
	}
	ct, err := t.Tree(disk.ChunkTreeObjectID)
	if err != nil {
		return err
	}
	k := disk.Key{ObjectID: disk.DevItemsObjectID, Type: disk.DevItemKey, Offset: uint64(dev)}
	err = ct.UpdateItem(t.tx, k, func(b []byte) error {
		var d disk.DevItem
		if err := d.Decode(b); err != nil {
			return err
		}
		if d.TotalBytes != old {
			return disk.Corruptf("dev item %d: total_bytes %d, the superblock says %d", dev, d.TotalBytes, old)
		}
		d.TotalBytes = size
		d.Encode(b)
		return nil
	})
	if err != nil {
		return fmt.Errorf("grow: dev item %d: %w", dev, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if g.grown == nil {
		g.grown = map[disk.DevID]uint64{}
	}
	g.grown[dev] = size
	g.free[dev].Insert(max(old, devReserved), size)
	t.changes++
	return nil
}

// deviceTotal is dev's size as this transaction sees it: the committed
// one, or what Grow made it.
func (t *Txn) deviceTotal(dev disk.DevID) uint64 {
	if g := t.growthOf(); g != nil && g.grown[dev] != 0 {
		return g.grown[dev]
	}
	return t.fs.set.Members[dev].Super.DevItem.TotalBytes
}

// growSizesSuper records Grow's sizes in the commit's superblock sb:
// total_bytes rises by what the devices grew, and sb's own dev_item
// takes its device's new size.
func (t *Txn) growSizesSuper(g *growth, sb *disk.Superblock) {
	for dev, size := range g.grown {
		sb.TotalBytes += size - t.fs.set.Members[dev].Super.DevItem.TotalBytes
		if sb.DevItem.DevID == dev {
			sb.DevItem.TotalBytes = size
		}
	}
}

// growSizesDevices sets the grown devices' own superblock dev_items
// (which writeSupers copies) once nothing can abort the commit.
func (t *Txn) growSizesDevices(g *growth) {
	for dev, size := range g.grown {
		t.fs.set.Members[dev].Super.DevItem.TotalBytes = size
	}
}

// ShrinkTo is ShrinkDevice of the only device of a single-device
// filesystem.
func (t *Txn) ShrinkTo(size uint64) error {
	if t.done {
		return fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	dev, err := t.singleDevice()
	if err != nil {
		return err
	}
	return t.ShrinkDevice(dev, size)
}

// ShrinkDevice makes device dev end at size bytes (a multiple of 64 KiB,
// at least 1 MiB more than the reserved first MiB), as the kernel's
// btrfs_shrink_device does: chunks with a stripe on dev past size are
// removed when empty (another chunk of their type remaining), cut when
// their used bytes end before it (SINGLE, DUP and RAID1* chunks, whose
// stripes are their length: every stripe, on every device, is cut
// alike), and otherwise emptied by relocation (relocate.go) and removed;
// what moves goes to chunks placed by the chunk allocator, which no
// longer sees dev's bytes past size (a RAID1 chunk takes stripes on
// the devices that have room). It refuses, before changing anything,
// what cannot move (shared extents: ErrShared) or fit below size
// (alloc.ErrNoSpace, naming the device and the bytes missing). The
// device item, the superblock's total_bytes and dev_item and the chunk
// records follow as for Shrink; the other devices' bytes_used lose the
// stripes of removed chunks. ShrinkDevice must be the only change of its
// transaction (it moves data first and then settles, which ends the
// data calls); on an error the caller aborts. The caller truncates an
// image file to size after the commit.
func (t *Txn) ShrinkDevice(dev disk.DevID, size uint64) error {
	if t.done {
		return fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	if err := t.loadAllSpace(); err != nil {
		return fmt.Errorf("shrink: %w", err)
	}
	m := t.fs.set.Members[dev]
	if m == nil {
		return fmt.Errorf("shrink: no device %d", dev)
	}
	if size%chunkAlign != 0 || size < devReserved+minStripe {
		return fmt.Errorf("shrink: size %d is not a multiple of %d of at least %d", size, chunkAlign, devReserved+minStripe)
	}
	g, err := t.startGrowth()
	if err != nil {
		return fmt.Errorf("shrink: %w", err)
	}
	if g.grown != nil || g.shrunk != nil || len(g.chunks) > 0 {
		return fmt.Errorf("shrink: %w: resizing after other changes in one transaction", ErrUnsupported)
	}
	g.shrunk = t.newShrinkState(dev)
	if size >= g.shrunk.total {
		return fmt.Errorf("shrink: device %d is %d bytes, not more than %d", dev, g.shrunk.total, size)
	}
	t.mu.Lock()
	g.free[dev].Remove(size, ^uint64(0)) // chunks made from now on stay below the end
	t.mu.Unlock()
	plan, err := t.planRelocation(g, dev, size)
	if err != nil {
		return fmt.Errorf("shrink: %w", err)
	}
	freed := map[disk.DevID]uint64{}
	for _, c := range plan.drops {
		// Before any new chunk's items go in: one may take the room.
		if err := t.applyCut(c); err != nil {
			return fmt.Errorf("shrink: chunk %d: %w", c.logical, err)
		}
		freedBy(c, freed)
	}
	if err := t.relocateData(plan); err != nil {
		return fmt.Errorf("shrink: moving data: %w", err)
	}
	if err := t.settle(); err != nil {
		return fmt.Errorf("shrink: settle before: %w", err)
	}
	if err := t.relocateTrees(plan); err != nil {
		return fmt.Errorf("shrink: moving tree blocks: %w", err)
	}
	cuts, err := t.planShrinkTo(g, dev, size)
	if err != nil {
		return fmt.Errorf("shrink: %w", err)
	}
	for _, c := range cuts {
		if err := t.applyCut(c); err != nil {
			return fmt.Errorf("shrink: chunk %d: %w", c.logical, err)
		}
		freedBy(c, freed)
	}
	if err := t.shrinkDevItems(dev, freed, size); err != nil {
		return fmt.Errorf("shrink: %w", err)
	}
	g.shrunk.addFreed(freed)
	g.shrunk.total = size
	if err := t.settle(); err != nil {
		return fmt.Errorf("shrink: settle after: %w", err)
	}
	if after := t.deviceEnd(dev); after > size {
		return fmt.Errorf("shrink: a chunk ends at %d, past the new end %d of device %d", after, size, dev)
	}
	return nil
}

// planShrinkTo drops or cuts (in memory) the groups relocation emptied
// whole or past their cut point: after planRelocation's cuts and drops
// they are the only chunks left past size on dev.
func (t *Txn) planShrinkTo(g *growth, dev disk.DevID, size uint64) ([]shrinkCut, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var past []*chunk.Chunk
	for c := range t.fs.chunks.All() {
		for k := 0; k < c.NumStripes(); k++ {
			if s := c.Stripe(k); s.DevID == dev && uint64(s.Offset)+c.StripeSize() > size {
				past = append(past, c)
				break
			}
		}
	}
	var cuts []shrinkCut
	for _, c := range past {
		grp := t.fs.space.Group(uint64(c.Logical()))
		cut := shrinkCut{logical: c.Logical(), old: c.Item(), oldStripe: c.StripeSize(), relocated: true}
		switch {
		case grp != nil && grp.ReadOnly:
			// Emptied by relocation: it goes whatever is pinned in it.
			if grp.Used != 0 {
				return cuts, fmt.Errorf("chunk %d: %d bytes still used after moving what it held", c.Logical(), grp.Used)
			}
		case grp != nil && grp.Limit != 0:
			cut.newLen = grp.Limit - grp.Start // its tail emptied
		default:
			return cuts, fmt.Errorf("chunk %d: past the new end and not relocated", c.Logical())
		}
		if err := t.cutInMemory(g, cut); err != nil {
			return cuts, err
		}
		cuts = append(cuts, cut)
	}
	return cuts, nil
}
