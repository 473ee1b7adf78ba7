package dump

import (
	"encoding/hex"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Printers of the extent tree, csum tree and free space tree items.

// extentItem prints EXTENT_ITEM and METADATA_ITEM payloads with their inline
// references. progs prints nothing for items shorter than the base
// structure, and stops at the first inline ref type it does not know.
func (p *printer) extentItem(k disk.Key, v view, size int) {
	if size < disk.ExtentItemBaseSize {
		return
	}
	flags := v.u64(16)
	p.printf("\t\trefs %d gen %d flags %s\n", v.u64(0), v.u64(8), extentFlagsString(flags))
	ptr := disk.ExtentItemBaseSize
	switch {
	case k.Type == disk.MetadataItemKey:
		p.printf("\t\ttree block skinny level %d\n", int32(k.Offset))
	case flags&uint64(disk.ExtentFlagTreeBlock) != 0:
		p.printf("\t\ttree block %s level %d\n", keyString(v.key(ptr)), v.u8(ptr+disk.KeySize))
		ptr += disk.TreeBlockInfoSize
	}
	for ptr < size {
		r := v.at(ptr)
		t := disk.KeyType(r.u8(0))
		off := r.u64(1)
		switch t {
		case disk.TreeBlockRefKey:
			p.printf("\t\ttree block backref root %s\n", ownerString(off))
		case disk.SharedBlockRefKey:
			p.printf("\t\tshared block backref parent %d\n", off)
		case disk.ExtentDataRefKey:
			p.dataRef(r.at(1))
		case disk.SharedDataRefKey:
			p.printf("\t\tshared data backref parent %d count %d\n", off, r.u32(9))
		default:
			return
		}
		ptr += disk.InlineRefSize(t)
	}
}

// dataRef prints a btrfs_extent_data_ref (inline or keyed).
func (p *printer) dataRef(v view) {
	p.printf("\t\textent data backref root %s objectid %d offset %d count %d\n",
		ownerString(v.u64(0)), v.u64(8), v.u64(16), v.u32(24))
}

func (p *printer) extentDataRef(_ disk.Key, v view, _ int) { p.dataRef(v) }

func (p *printer) sharedDataRef(_ disk.Key, v view, _ int) {
	p.printf("\t\tshared data backref count %d\n", v.u32(0))
}

// extentCsum prints the range an EXTENT_CSUM item covers and, with
// CsumItems, each sum with the address of its sector.
func (p *printer) extentCsum(k disk.Key, v view, size int) {
	cs := p.o.csumSize()
	n := uint64(size / cs)
	ss := p.o.sectorSize()
	p.printf("\t\trange start %d end %d length %d\n", k.Offset, k.Offset+n*ss, n*ss)
	if !p.o.CsumItems {
		return
	}
	// Sums are grouped 16 bytes of checksum to a line; an item without a
	// whole sum still ends its (empty) line.
	perLine := uint64(max(1, 16/cs))
	for i := uint64(0); i < n && p.err == nil; i++ {
		sep := " "
		if i%perLine == 0 {
			sep = "\t\t"
		}
		p.printf("%s[%d] 0x%s", sep, k.Offset+i*ss, hex.EncodeToString(v.bytes(int(i)*cs, cs)))
		if (i+1)%perLine == 0 {
			p.printf("\n")
		}
	}
	if n == 0 || n%perLine != 0 {
		p.printf("\n")
	}
}

func (p *printer) blockGroup(_ disk.Key, v view, _ int) {
	p.printf("\t\tblock group used %d chunk_objectid %d flags %s\n", v.u64(0), v.u64(8), blockGroupFlagsString(v.u64(16)))
}

func (p *printer) freeSpaceInfo(_ disk.Key, v view, _ int) {
	p.printf("\t\tfree space info extent count %d flags %d\n", v.u32(0), v.u32(4))
}

// freeSpaceHeader prints the header of a v1 free space cache inode
// (key (FREE_SPACE, 0, offset)).
func (p *printer) freeSpaceHeader(v view) {
	p.printf("\t\tlocation %s\n", keyString(v.key(0)))
	p.printf("\t\tcache generation %d entries %d bitmaps %d\n", v.u64(17), v.u64(25), v.u64(33))
}
