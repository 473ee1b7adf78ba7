package mkfs

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

const (
	mib = 1 << 20
	gib = 1 << 30

	// Where progs 6.2 puts its bootstrap chunks, which it keeps when their
	// profile is SINGLE; DUP chunks are laid out from dupStart on.
	sysSingleStart  = 1 * mib
	sysSingleSize   = 4 * mib
	metaSingleStart = 5 * mib
	metaSingleSize  = 8 * mib
	dataSingleStart = 13 * mib
	dataSingleSize  = 8 * mib
	dupStart        = 21 * mib
	sysDUPSize      = 8 * mib
)

// plannedChunk is one chunk of the new filesystem.
type plannedChunk struct {
	logical disk.LogicalAddr
	item    disk.ChunkItem
}

func (p *plannedChunk) end() disk.LogicalAddr { return p.logical + disk.LogicalAddr(p.item.Length) }

func (p *plannedChunk) stripeSize() uint64 { return p.item.Length }

// layout is the chunk plan: sys, meta and data, in logical order in list.
type layout struct {
	sys, meta, data *plannedChunk
	list            []*plannedChunk
	devUsed         uint64
}

// dupChunkSize is progs 6.2's size rule for the first DUP chunk of a type:
// the cap when it is at most a tenth of the filesystem, else half of that
// tenth (64 KiB aligned), never below floor.
func dupChunkSize(fsSize, capSize, floor uint64) uint64 {
	limit := min(capSize, fsSize/10)
	if capSize <= limit {
		return capSize
	}
	return max(floor, (limit/2)&^(disk.StripeLen-1))
}

// planLayout places the three chunks; it fails when they do not fit.
func planLayout(c *config) (*layout, error) {
	l := &layout{}
	mk := func(flags uint64, logical, length uint64, phys ...uint64) *plannedChunk {
		p := &plannedChunk{logical: disk.LogicalAddr(logical), item: disk.ChunkItem{
			Length: length, Owner: disk.ExtentTreeObjectID, StripeLen: disk.StripeLen, Type: flags,
			IOAlign: disk.StripeLen, IOWidth: disk.StripeLen, SectorSize: uint32(c.sectorSize),
			NumStripes: uint16(len(phys)), SubStripes: 1}}
		for _, ph := range phys {
			p.item.Stripes = append(p.item.Stripes, disk.Stripe{DevID: 1, Offset: disk.PhysicalAddr(ph), DevUUID: c.devUUID})
			l.devUsed += length
		}
		return p
	}
	cursor := uint64(dupStart) // logical and physical cursor for DUP chunks
	phys := uint64(dupStart)
	dup := func(flags, length uint64) *plannedChunk {
		p := mk(flags|disk.BlockGroupDUP, cursor, length, phys, phys+length)
		cursor += length
		phys += 2 * length
		return p
	}
	if !c.metaDUP {
		// progs' bootstrap chunks, kept as they are; the SYSTEM one
		// has sector-sized I/O alignment and sub_stripes 0.
		l.sys = mk(disk.BlockGroupSystem, sysSingleStart, sysSingleSize, sysSingleStart)
		l.meta = mk(disk.BlockGroupMetadata, metaSingleStart, metaSingleSize, metaSingleStart)
		l.sys.item.IOAlign, l.sys.item.IOWidth, l.sys.item.SubStripes = uint32(c.sectorSize), uint32(c.sectorSize), 0
	}
	if c.feat.mixed {
		// One DATA|METADATA chunk where progs' bootstrap METADATA
		// chunk lies, and no DATA chunk (mkfs.btrfs 6.2 --mixed).
		l.meta.item.Type |= disk.BlockGroupData
	} else if !c.dataDUP {
		l.data = mk(disk.BlockGroupData, dataSingleStart, dataSingleSize, dataSingleStart)
	}
	if c.metaDUP {
		metaCap := uint64(256 * mib)
		if c.size > 50*gib {
			metaCap = gib
		}
		l.sys = dup(disk.BlockGroupSystem, sysDUPSize)
		l.meta = dup(disk.BlockGroupMetadata, dupChunkSize(c.size, metaCap, 32*mib))
	}
	if c.dataDUP {
		l.data = dup(disk.BlockGroupData, dupChunkSize(c.size, gib, 64*mib))
	}
	end := uint64(dataSingleStart + dataSingleSize)
	if c.metaDUP || c.dataDUP {
		end = max(end, phys)
	}
	l.list = []*plannedChunk{l.sys, l.meta, l.data}
	if c.feat.mixed {
		end = metaSingleStart + metaSingleSize
		l.list = []*plannedChunk{l.sys, l.meta}
	}
	if end > c.size {
		return nil, fmt.Errorf("mkfs: device of %d bytes too small: the chunks need %d", c.size, end)
	}
	sortChunks(l.list)
	if err := l.checkSupers(c, nil); err != nil {
		return nil, err
	}
	return l, nil
}

// checkSupers makes sure no tree block copy overlaps a superblock copy:
// the kernel excludes those ranges from allocation, and writing a block
// there would destroy the copy. The layout keeps tree blocks at the start
// of their chunks, well clear of 64 MiB, so this is a safety net. extra
// are the root tree's blocks past its first.
func (l *layout) checkSupers(c *config, extra []disk.LogicalAddr) error {
	owners := map[disk.LogicalAddr]disk.ObjectID{}
	for id, a := range l.blockAddrs(c) {
		owners[a] = id
	}
	for _, a := range extra {
		owners[a] = disk.RootTreeObjectID
	}
	for a, id := range owners {
		for _, p := range []*plannedChunk{l.sys, l.meta} {
			if a < p.logical || a >= p.end() {
				continue
			}
			for _, st := range p.item.Stripes {
				phys := uint64(st.Offset) + uint64(a-p.logical)
				for i := 0; i < disk.SuperMirrorMax; i++ {
					s := uint64(disk.SuperblockOffsetOf(i))
					if phys < s+disk.SuperblockSize && s < phys+uint64(c.nodeSize) {
						return fmt.Errorf("mkfs: tree %s block at %d would overlap superblock copy %d", id.TreeName(), a, i)
					}
				}
			}
		}
	}
	return nil
}

func sortChunks(list []*plannedChunk) {
	for i := 1; i < len(list); i++ {
		for j := i; j > 0 && list[j].logical < list[j-1].logical; j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
}

// treeOrder is the order of the tree blocks in the METADATA chunk; the
// chunk tree's block is the second of the SYSTEM chunk, as with progs.
// The block-group tree (not made by progs 6.2) goes after the free-space
// tree; no tree's place depends on it but those after it.
var treeOrder = []disk.ObjectID{
	disk.ExtentTreeObjectID, disk.FSTreeObjectID, disk.CsumTreeObjectID,
	disk.DataRelocTreeObjectID, disk.UUIDTreeObjectID, disk.DevTreeObjectID,
	disk.FreeSpaceTreeObjectID, disk.BlockGroupTreeObjectID, disk.RootTreeObjectID,
}

// treeOrderSingle is the order progs 6.2 ends up with in its (kept)
// SINGLE bootstrap METADATA chunk when data is SINGLE too, and
// treeOrderSingleDUP when it adds a DUP data chunk.
var (
	treeOrderSingle = []disk.ObjectID{
		disk.RootTreeObjectID, disk.ExtentTreeObjectID, disk.FSTreeObjectID,
		disk.DevTreeObjectID, disk.FreeSpaceTreeObjectID, disk.BlockGroupTreeObjectID, disk.CsumTreeObjectID,
		disk.DataRelocTreeObjectID, disk.UUIDTreeObjectID,
	}
	// treeOrderMixed is progs 6.2's order in its DATA|METADATA chunk.
	treeOrderMixed = []disk.ObjectID{
		disk.RootTreeObjectID, disk.FSTreeObjectID, disk.ExtentTreeObjectID,
		disk.DevTreeObjectID, disk.FreeSpaceTreeObjectID, disk.BlockGroupTreeObjectID, disk.CsumTreeObjectID,
		disk.DataRelocTreeObjectID, disk.UUIDTreeObjectID,
	}
	treeOrderSingleDUP = []disk.ObjectID{
		disk.ExtentTreeObjectID, disk.FSTreeObjectID, disk.DevTreeObjectID,
		disk.FreeSpaceTreeObjectID, disk.BlockGroupTreeObjectID, disk.RootTreeObjectID, disk.CsumTreeObjectID,
		disk.DataRelocTreeObjectID, disk.UUIDTreeObjectID,
	}
)

// blockAddrs assigns every tree its one block.
func (l *layout) blockAddrs(c *config) map[disk.ObjectID]disk.LogicalAddr {
	// progs keeps the chunk root in the second block of the SYSTEM chunk
	// (the first with mixed groups).
	m := map[disk.ObjectID]disk.LogicalAddr{disk.ChunkTreeObjectID: l.sys.logical + disk.LogicalAddr(c.nodeSize)}
	next := l.meta.logical
	order := treeOrder
	switch {
	case c.feat.mixed:
		m[disk.ChunkTreeObjectID] = l.sys.logical
		order = treeOrderMixed
	case !c.metaDUP && c.dataDUP:
		order = treeOrderSingleDUP
	case !c.metaDUP:
		order = treeOrderSingle
	}
	for _, id := range order {
		if id == disk.FreeSpaceTreeObjectID && !c.feat.fst || id == disk.BlockGroupTreeObjectID && !c.feat.bgt {
			continue
		}
		m[id] = next
		next += disk.LogicalAddr(c.nodeSize)
	}
	return m
}
