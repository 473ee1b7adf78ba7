package dump

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// BlockOptions say how tree blocks are printed.
type BlockOptions struct {
	// CsumType and SectorSize are the filesystem's (from the superblock):
	// EXTENT_CSUM items are measured and split with them, and CsumHeaders
	// prints that many bytes of each header checksum. The zero CsumType is
	// crc32c; a zero SectorSize is taken as 4096.
	CsumType   disk.CsumType
	SectorSize uint32
	// HideNames replaces file names and xattr names and values by HIDDEN
	// (dump-tree --hide-names).
	HideNames bool
	// CsumItems prints every checksum of EXTENT_CSUM items
	// (dump-tree --csum-items).
	CsumItems bool
	// CsumHeaders appends each block's stored checksum to its flags line
	// (dump-tree --csum-headers).
	CsumHeaders bool
	// Location is the time zone of printed dates; nil means time.Local,
	// which is what btrfs-progs uses.
	Location *time.Location
}

// BlockOptionsFor returns the options that match sb.
func BlockOptionsFor(sb *disk.Superblock) BlockOptions {
	return BlockOptions{CsumType: sb.CsumType, SectorSize: sb.SectorSize}
}

func (o BlockOptions) csumSize() int {
	if !o.CsumType.Valid() {
		return disk.CsumFieldSize
	}
	return o.CsumType.Size()
}

func (o BlockOptions) sectorSize() uint64 {
	if o.SectorSize == 0 {
		return 4096
	}
	return uint64(o.SectorSize)
}

// printer buffers output and remembers the first write error, so the
// printers can be written as straight sequences of printf calls.
type printer struct {
	w    *bufio.Writer
	err  error
	o    BlockOptions
	json bool // write JSON lines instead of text
}

func newPrinter(w io.Writer, o BlockOptions) *printer {
	return &printer{w: bufio.NewWriterSize(w, 64<<10), o: o}
}

func (p *printer) printf(format string, args ...any) {
	if p.err != nil {
		return
	}
	if _, err := fmt.Fprintf(p.w, format, args...); err != nil {
		p.err = err
	}
}

// jsonLine writes v as one line of JSON.
func (p *printer) jsonLine(v any) {
	if p.err == nil {
		p.err = writeJSONLine(p.w, v)
	}
}

func (p *printer) flush() error {
	if p.err != nil {
		return p.err
	}
	p.err = p.w.Flush()
	return p.err
}

// Block prints one tree block (leaf or node) exactly as
// `btrfs inspect-internal dump-tree -b` of btrfs-progs 6.2 does: the
// header lines, then every item with its payload, or every key pointer.
// n must be at least a header long; its items are read through bounded
// views, so a damaged block prints what progs would print without reading
// outside n.
func Block(w io.Writer, n disk.Node, o BlockOptions) error {
	p := newPrinter(w, o)
	p.block(n)
	return p.flush()
}

// BlockJSON writes one tree block as a line of JSON (the "block" record
// of the package documentation, without its "record" member).
func BlockJSON(w io.Writer, n disk.Node, o BlockOptions) error {
	if len(n) < disk.HeaderSize {
		return fmt.Errorf("dump: block of %d bytes is shorter than a header", len(n))
	}
	p := newPrinter(w, o)
	p.jsonLine(p.blockJSON(n))
	return p.flush()
}

func (p *printer) block(n disk.Node) {
	if len(n) < disk.HeaderSize {
		p.err = fmt.Errorf("dump: block of %d bytes is shorter than a header", len(n))
		return
	}
	if p.json {
		p.jsonLine(append(obj{{"record", "block"}}, p.blockJSON(n)...))
		return
	}
	p.header(n)
	if n.IsLeaf() {
		p.leafItems(n)
		return
	}
	nr := min(n.NumItems(), (len(n)-disk.HeaderSize)/disk.KeyPtrSize)
	for i := 0; i < nr; i++ {
		kp := n.KeyPtr(i)
		p.printf("\t%s block %d gen %d\n", keyString(kp.Key), kp.BlockPtr, kp.Generation)
	}
}

// leafFreeSpace is progs' btrfs_leaf_free_space: the data area minus the
// item headers and the span from the first item's end to the last item's
// start.
func leafFreeSpace(n disk.Node) int {
	dataSize := len(n) - disk.HeaderSize
	nr := n.NumItems()
	if nr == 0 {
		return dataSize
	}
	if disk.HeaderSize+disk.ItemSize*nr > len(n) {
		return dataSize - disk.ItemSize*nr
	}
	first, last := n.ItemHeader(0), n.ItemHeader(nr-1)
	used := int(first.Offset) + int(first.Size) - int(last.Offset) + disk.ItemSize*nr
	return dataSize - used
}

func (p *printer) header(n disk.Node) {
	h := n.Header()
	kind := "leaf"
	if h.Level == 0 {
		p.printf("leaf %d items %d free space %d generation %d owner %s\n",
			h.Bytenr, h.NumItems, int32(leafFreeSpace(n)), h.Generation, ownerString(uint64(h.Owner)))
	} else {
		kind = "node"
		free := uint32(disk.MaxKeyPtrs(len(n)) - int(h.NumItems))
		p.printf("node %d level %d items %d free space %d generation %d owner %s\n",
			h.Bytenr, h.Level, h.NumItems, free, h.Generation, ownerString(uint64(h.Owner)))
	}
	flags := h.Flags &^ (0xff << disk.BackrefRevShift)
	p.printf("%s %d flags 0x%x(%s) backref revision %d", kind, h.Bytenr, flags, headerFlagsString(flags), h.BackrefRev())
	if p.o.CsumHeaders {
		p.printf(" csum 0x%s", hex.EncodeToString(h.Csum[:p.o.csumSize()]))
	}
	p.printf("\nfs uuid %s\nchunk uuid %s\n", h.FSID, h.ChunkTreeUUID)
}

func (p *printer) leafItems(n disk.Node) {
	nr := n.NumItems()
	for i := 0; i < nr && disk.HeaderSize+disk.ItemSize*(i+1) <= len(n); i++ {
		it := n.ItemHeader(i)
		p.printf("\titem %d %s itemoff %d itemsize %d\n", i, keyString(it.Key), it.Offset, it.Size)
		start := disk.HeaderSize + int(it.Offset)
		v := view{b: n, off: start}
		// An item reaching past the block is refused by progs before it
		// prints anything; here its size is cut so loops over its entries
		// stay bounded by the block.
		p.item(it.Key, v, min(int(it.Size), max(0, len(n)-start)))
		if p.err != nil {
			return
		}
	}
}

// item prints the payload lines of one item.
func (p *printer) item(k disk.Key, v view, size int) {
	if k.Type == 0 && k.ObjectID == disk.FreeSpaceObjectID {
		p.freeSpaceHeader(v)
	}
	if fn := itemPrinters[k.Type]; fn != nil {
		fn(p, k, v, size)
	}
}

// itemPrinter prints the payload of one item type.
type itemPrinter func(p *printer, k disk.Key, v view, size int)

// itemPrinters maps key types to payload printers; types missing here
// (DEV_REPLACE, VERITY_*, QGROUP_RELATION, unknown types) print only the
// item line, as in progs 6.2.
var itemPrinters map[disk.KeyType]itemPrinter

func init() {
	itemPrinters = map[disk.KeyType]itemPrinter{
		disk.InodeItemKey:          (*printer).inodeItem,
		disk.InodeRefKey:           (*printer).inodeRef,
		disk.InodeExtrefKey:        (*printer).inodeExtref,
		disk.DirItemKey:            (*printer).dirItem,
		disk.DirIndexKey:           (*printer).dirItem,
		disk.XattrItemKey:          (*printer).dirItem,
		disk.DirLogItemKey:         (*printer).dirLog,
		disk.DirLogIndexKey:        (*printer).dirLog,
		disk.OrphanItemKey:         fixedLine("orphan item"),
		disk.RootItemKey:           (*printer).rootItem,
		disk.RootRefKey:            (*printer).rootRef,
		disk.RootBackrefKey:        (*printer).rootRef,
		disk.ExtentItemKey:         (*printer).extentItem,
		disk.MetadataItemKey:       (*printer).extentItem,
		disk.TreeBlockRefKey:       fixedLine("tree block backref"),
		disk.SharedBlockRefKey:     fixedLine("shared block backref"),
		disk.ExtentDataRefKey:      (*printer).extentDataRef,
		disk.SharedDataRefKey:      (*printer).sharedDataRef,
		disk.ExtentRefV0Key:        fixedLine("extent ref v0 (deprecated)"),
		csumItemKey:                fixedLine("csum item"),
		disk.ExtentCsumKey:         (*printer).extentCsum,
		disk.ExtentDataKey:         (*printer).fileExtent,
		disk.BlockGroupItemKey:     (*printer).blockGroup,
		disk.FreeSpaceInfoKey:      (*printer).freeSpaceInfo,
		disk.FreeSpaceExtentKey:    fixedLine("free space extent"),
		disk.FreeSpaceBitmapKey:    fixedLine("free space bitmap"),
		disk.ChunkItemKey:          (*printer).chunkItem,
		disk.DevItemKey:            (*printer).devItem,
		disk.DevExtentKey:          (*printer).devExtent,
		disk.QgroupStatusKey:       (*printer).qgroupStatus,
		disk.QgroupInfoKey:         (*printer).qgroupInfo,
		disk.QgroupLimitKey:        (*printer).qgroupLimit,
		disk.UUIDKeySubvol:         (*printer).uuidItem,
		disk.UUIDKeyReceivedSubvol: (*printer).uuidItem,
		disk.StringItemKey:         (*printer).stringItem,
		disk.PersistentItemKey:     (*printer).persistentItem,
		disk.TemporaryItemKey:      (*printer).temporaryItem,
	}
}

// fixedLine is the printer of items whose payload progs describes with one
// constant line.
func fixedLine(s string) itemPrinter {
	return func(p *printer, _ disk.Key, _ view, _ int) { p.printf("\t\t%s\n", s) }
}
