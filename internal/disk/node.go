package disk

import "fmt"

// Sizes of the fixed parts of tree blocks.
const (
	HeaderSize = 101 // struct btrfs_header
	ItemSize   = 25  // struct btrfs_item: key, offset u32, size u32
	KeyPtrSize = 33  // struct btrfs_key_ptr: key, blockptr u64, generation u64
	MaxLevel   = 8   // BTRFS_MAX_LEVEL: levels are 0..7
)

// Header flag bits (the low bits of Header.Flags) and the back-reference
// revision kept in its top byte.
const (
	HeaderFlagWritten  uint64 = 1 << 0 // BTRFS_HEADER_FLAG_WRITTEN
	HeaderFlagReloc    uint64 = 1 << 1 // BTRFS_HEADER_FLAG_RELOC
	BackrefRevShift           = 56     // BTRFS_BACKREF_REV_SHIFT
	MixedBackrefRev    uint64 = 1      // BTRFS_MIXED_BACKREF_REV
	DefaultHeaderFlags        = HeaderFlagWritten | MixedBackrefRev<<BackrefRevShift
)

// Header is struct btrfs_header, the first 101 bytes of every tree block.
type Header struct {
	Csum          [CsumFieldSize]byte // 0x00
	FSID          UUID                // 0x20
	Bytenr        LogicalAddr         // 0x30
	Flags         uint64              // 0x38
	ChunkTreeUUID UUID                // 0x40
	Generation    Generation          // 0x50
	Owner         ObjectID            // 0x58
	NumItems      uint32              // 0x60
	Level         uint8               // 0x64
}

// Decode reads a Header from b.
func (h *Header) Decode(b []byte) error {
	if len(b) < HeaderSize {
		return shortErr("tree block header", len(b), HeaderSize)
	}
	copy(h.Csum[:], b[0:32])
	copy(h.FSID[:], b[0x20:0x30])
	h.Bytenr = LogicalAddr(le.Uint64(b[0x30:]))
	h.Flags = le.Uint64(b[0x38:])
	copy(h.ChunkTreeUUID[:], b[0x40:0x50])
	h.Generation = Generation(le.Uint64(b[0x50:]))
	h.Owner = ObjectID(le.Uint64(b[0x58:]))
	h.NumItems = le.Uint32(b[0x60:])
	h.Level = b[0x64]
	return nil
}

// Encode writes h into b.
func (h *Header) Encode(b []byte) {
	_ = b[HeaderSize-1]
	copy(b[0:32], h.Csum[:])
	copy(b[0x20:0x30], h.FSID[:])
	le.PutUint64(b[0x30:], uint64(h.Bytenr))
	le.PutUint64(b[0x38:], h.Flags)
	copy(b[0x40:0x50], h.ChunkTreeUUID[:])
	le.PutUint64(b[0x50:], uint64(h.Generation))
	le.PutUint64(b[0x58:], uint64(h.Owner))
	le.PutUint32(b[0x60:], h.NumItems)
	b[0x64] = h.Level
}

// BackrefRev is the back-reference revision in the top byte of the flags.
func (h *Header) BackrefRev() uint64 { return h.Flags >> BackrefRevShift }

// LeafDataSize is the bytes available to item headers and data in a leaf.
func LeafDataSize(nodesize int) int { return nodesize - HeaderSize }

// MaxItemDataSize is the largest item payload a leaf of nodesize can hold.
func MaxItemDataSize(nodesize int) int { return LeafDataSize(nodesize) - ItemSize }

// MaxKeyPtrs is the number of key pointers a node of nodesize can hold.
func MaxKeyPtrs(nodesize int) int { return LeafDataSize(nodesize) / KeyPtrSize }

// Item is struct btrfs_item: a leaf item header.
type Item struct {
	Key    Key    // 0x00
	Offset uint32 // 0x11, data offset relative to the end of the header
	Size   uint32 // 0x15
}

// KeyPtr is struct btrfs_key_ptr: a node's pointer to a child block.
type KeyPtr struct {
	Key        Key         // 0x00
	BlockPtr   LogicalAddr // 0x11
	Generation Generation  // 0x19
}

// Node is a read-only view of one tree block (leaf or node). Accessors do
// not copy; the block must not change while the view is used. Accessors
// assume the block passed Check (indexes and offsets in range); on an
// unchecked block they may panic.
type Node []byte

// Owner, Level, ... read header fields without decoding the whole header.

// Bytenr returns the header's logical address.
func (n Node) Bytenr() LogicalAddr { return LogicalAddr(le.Uint64(n[0x30:])) }

// Generation returns the header generation.
func (n Node) Generation() Generation { return Generation(le.Uint64(n[0x50:])) }

// Owner returns the owning tree id.
func (n Node) Owner() ObjectID { return ObjectID(le.Uint64(n[0x58:])) }

// NumItems returns nritems.
func (n Node) NumItems() int { return int(le.Uint32(n[0x60:])) }

// Level returns the level (0 for leaves).
func (n Node) Level() int { return int(n[0x64]) }

// IsLeaf reports level 0.
func (n Node) IsLeaf() bool { return n[0x64] == 0 }

// Header decodes the full header.
func (n Node) Header() Header {
	var h Header
	_ = h.Decode(n)
	return h
}

// ItemHeader returns leaf item i's header.
func (n Node) ItemHeader(i int) Item {
	p := n[HeaderSize+ItemSize*i:]
	return Item{Key: KeyAt(p), Offset: le.Uint32(p[17:]), Size: le.Uint32(p[21:])}
}

// Key returns the key of item i (leaf) or key pointer i (node).
func (n Node) Key(i int) Key {
	if n.IsLeaf() {
		return KeyAt(n[HeaderSize+ItemSize*i:])
	}
	return KeyAt(n[HeaderSize+KeyPtrSize*i:])
}

// ItemData returns the payload of leaf item i, a sub-slice of the block.
func (n Node) ItemData(i int) []byte {
	it := n.ItemHeader(i)
	start := HeaderSize + int(it.Offset)
	return n[start : start+int(it.Size) : start+int(it.Size)]
}

// KeyPtr returns node pointer i.
func (n Node) KeyPtr(i int) KeyPtr {
	p := n[HeaderSize+KeyPtrSize*i:]
	return KeyPtr{Key: KeyAt(p), BlockPtr: LogicalAddr(le.Uint64(p[17:])), Generation: Generation(le.Uint64(p[25:]))}
}

// PutItemHeader writes leaf item header i.
func PutItemHeader(block []byte, i int, it Item) {
	p := block[HeaderSize+ItemSize*i:]
	it.Key.Encode(p)
	le.PutUint32(p[17:], it.Offset)
	le.PutUint32(p[21:], it.Size)
}

// PutKeyPtr writes node pointer i.
func PutKeyPtr(block []byte, i int, kp KeyPtr) {
	p := block[HeaderSize+KeyPtrSize*i:]
	kp.Key.Encode(p)
	le.PutUint64(p[17:], uint64(kp.BlockPtr))
	le.PutUint64(p[25:], uint64(kp.Generation))
}

// Expect is what a reader knows about a block before reading it: from the
// parent's key pointer, a root item or the superblock. Zero fields (and
// negative Level) are not checked.
type Expect struct {
	Bytenr     LogicalAddr // where the block was read from; always checked
	Level      int         // -1: unknown
	Generation Generation  // 0: unknown
	Owner      ObjectID    // 0: unknown; subvolume trees may share blocks, see OwnerAny
	OwnerAny   bool        // accept any owner (fs trees share blocks after snapshots)
	FirstKey   *Key        // the parent's key for this child
}

// BlockParams are the filesystem-wide facts a block is checked against.
type BlockParams struct {
	NodeSize int
	CsumType CsumType
	FSID     UUID // fsid, or metadata_uuid when that feature is on
	SuperGen Generation
}

// Check verifies a block read from disk: size, checksum, header against the
// expectations, item and key-pointer bounds, key order and leaf packing.
// It returns one *CorruptError listing the first problem found.
func (n Node) Check(p BlockParams, e Expect) error {
	fail := func(format string, args ...any) error {
		return &CorruptError{Logical: e.Bytenr, Tree: e.Owner, What: fmt.Sprintf(format, args...)}
	}
	if len(n) != p.NodeSize || p.NodeSize < HeaderSize+KeyPtrSize {
		return fail("block size %d, want %d", len(n), p.NodeSize)
	}
	if !p.CsumType.VerifyBlock(n) {
		return fail("checksum mismatch")
	}
	if err := n.CheckExpect(p, e); err != nil {
		return err
	}
	h := n.Header()
	var err error
	if h.Level == 0 {
		err = n.checkLeaf(p.NodeSize)
	} else {
		err = n.checkNode(p.NodeSize)
	}
	if err != nil {
		return fail("%s", err.Error())
	}
	return nil
}

// CheckExpect verifies only the header against the filesystem and the
// reader's expectations (bytenr, fsid, level, generation, owner, first key):
// what must be re-checked when a block already verified once is met again
// through another pointer.
func (n Node) CheckExpect(p BlockParams, e Expect) error {
	fail := func(format string, args ...any) error {
		return &CorruptError{Logical: e.Bytenr, Tree: e.Owner, What: fmt.Sprintf(format, args...)}
	}
	if len(n) < HeaderSize {
		return fail("block of %d bytes", len(n))
	}
	h := n.Header()
	if h.Bytenr != e.Bytenr {
		return fail("header bytenr %d, want %d", h.Bytenr, e.Bytenr)
	}
	if h.FSID != p.FSID {
		return fail("header fsid %s, want %s", h.FSID, p.FSID)
	}
	if h.Level >= MaxLevel || (e.Level >= 0 && int(h.Level) != e.Level) {
		return fail("level %d, want %d", h.Level, e.Level)
	}
	if e.Generation != 0 && h.Generation != e.Generation {
		return fail("parent transid verify failed: generation %d, want %d", h.Generation, e.Generation)
	}
	if p.SuperGen != 0 && h.Generation > p.SuperGen+1 {
		return fail("generation %d newer than superblock %d", h.Generation, p.SuperGen)
	}
	if e.Owner != 0 && !e.OwnerAny && h.Owner != e.Owner {
		return fail("owner %s, want %s", h.Owner.TreeName(), e.Owner.TreeName())
	}
	if e.FirstKey != nil && h.NumItems > 0 && len(n) >= HeaderSize+KeyPtrSize && n.Key(0) != *e.FirstKey {
		return fail("first key %v, parent says %v", n.Key(0), *e.FirstKey)
	}
	return nil
}

func (n Node) checkLeaf(nodesize int) error {
	nr := n.NumItems()
	dataSize := LeafDataSize(nodesize)
	if nr > dataSize/ItemSize {
		return fmt.Errorf("leaf has %d items, at most %d fit", nr, dataSize/ItemSize)
	}
	end := uint64(dataSize)
	headersEnd := uint64(ItemSize * nr)
	for i := 0; i < nr; i++ {
		it := n.ItemHeader(i)
		if i > 0 && !n.Key(i-1).Less(it.Key) {
			return fmt.Errorf("item %d key %v not above previous key %v", i, it.Key, n.Key(i-1))
		}
		itEnd := uint64(it.Offset) + uint64(it.Size)
		if itEnd != end {
			return fmt.Errorf("item %d key %v data ends at %d, want %d", i, it.Key, itEnd, end)
		}
		if uint64(it.Offset) < headersEnd {
			return fmt.Errorf("item %d key %v data at %d overlaps item headers ending at %d", i, it.Key, it.Offset, headersEnd)
		}
		end = uint64(it.Offset)
	}
	return nil
}

func (n Node) checkNode(nodesize int) error {
	nr := n.NumItems()
	if nr == 0 || nr > MaxKeyPtrs(nodesize) {
		return fmt.Errorf("node has %d pointers, want 1..%d", nr, MaxKeyPtrs(nodesize))
	}
	for i := 0; i < nr; i++ {
		kp := n.KeyPtr(i)
		if kp.BlockPtr == 0 || uint64(kp.BlockPtr)%4096 != 0 {
			return fmt.Errorf("pointer %d to unaligned block %d", i, kp.BlockPtr)
		}
		if i > 0 && !n.Key(i-1).Less(kp.Key) {
			return fmt.Errorf("pointer %d key %v not above previous key %v", i, kp.Key, n.Key(i-1))
		}
	}
	return nil
}
