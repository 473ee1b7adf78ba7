package disk

import (
	"fmt"
	"slices"
)

// Sizes of the extent-tree structures.
const (
	ExtentItemBaseSize = 24 // struct btrfs_extent_item: refs, generation, flags
	TreeBlockInfoSize  = 18 // struct btrfs_tree_block_info: key, level
	ExtentDataRefSize  = 28 // struct btrfs_extent_data_ref
	SharedDataRefSize  = 4  // struct btrfs_shared_data_ref
	// Encoded sizes of inline refs, type byte included.
	InlineTreeBlockRefSize   = 9  // type + root
	InlineSharedBlockRefSize = 9  // type + parent
	InlineExtentDataRefSize  = 29 // type + struct btrfs_extent_data_ref
	InlineSharedDataRefSize  = 13 // type + parent + count
	InlineOwnerRefSize       = 9  // type + root
)

// ExtentFlags is the flags word of an extent item.
type ExtentFlags uint64

// Extent flags (BTRFS_EXTENT_FLAG_* and BTRFS_BLOCK_FLAG_FULL_BACKREF).
const (
	ExtentFlagData        ExtentFlags = 1 << 0 // a data extent
	ExtentFlagTreeBlock   ExtentFlags = 1 << 1 // a tree block
	ExtentFlagFullBackref ExtentFlags = 1 << 8 // tree block whose refs name parents (SHARED_BLOCK_REF)
	extentFlagsKnown                  = ExtentFlagData | ExtentFlagTreeBlock | ExtentFlagFullBackref
)

var extentFlagNames = []flagName{
	{uint64(ExtentFlagData), "DATA"}, {uint64(ExtentFlagTreeBlock), "TREE_BLOCK"},
	{uint64(ExtentFlagFullBackref), "FULL_BACKREF"},
}

// String prints DATA, TREE_BLOCK or TREE_BLOCK|FULL_BACKREF as dump-tree does.
func (f ExtentFlags) String() string { return flagsString(uint64(f), extentFlagNames) }

// TreeBlockInfo is struct btrfs_tree_block_info (18 bytes): the first key and
// level of a tree block, stored in non-skinny EXTENT_ITEMs of tree blocks.
type TreeBlockInfo struct {
	Key   Key   // 0x00
	Level uint8 // 0x11
}

// ExtentDataRef is struct btrfs_extent_data_ref (28 bytes): Count
// EXTENT_DATA items of inode ObjectID in tree Root whose key offset minus
// their extent offset equals Offset point at the extent. It is the payload
// of keyed EXTENT_DATA_REF items (one or more per item) and of inline refs.
type ExtentDataRef struct {
	Root     ObjectID // 0x00
	ObjectID ObjectID // 0x08 inode number
	Offset   uint64   // 0x10 file offset minus the file extent's Offset
	Count    uint32   // 0x18
}

// Hash is the key offset of the keyed ref and the inline-ref sort sequence.
func (r ExtentDataRef) Hash() uint64 { return DataRefHash(r.Root, r.ObjectID, r.Offset) }

// Size returns ExtentDataRefSize.
func (r *ExtentDataRef) Size() int { return ExtentDataRefSize }

// Decode reads an ExtentDataRef from b.
func (r *ExtentDataRef) Decode(b []byte) error {
	if len(b) < ExtentDataRefSize {
		return shortErr("extent data ref", len(b), ExtentDataRefSize)
	}
	r.Root = ObjectID(le.Uint64(b))
	r.ObjectID = ObjectID(le.Uint64(b[8:]))
	r.Offset = le.Uint64(b[16:])
	r.Count = le.Uint32(b[24:])
	return nil
}

// Encode writes r into b.
func (r *ExtentDataRef) Encode(b []byte) {
	_ = b[ExtentDataRefSize-1]
	le.PutUint64(b, uint64(r.Root))
	le.PutUint64(b[8:], uint64(r.ObjectID))
	le.PutUint64(b[16:], r.Offset)
	le.PutUint32(b[24:], r.Count)
}

// ExtentDataRefs is the payload of a keyed EXTENT_DATA_REF item: one or
// more refs whose hashes collide.
type ExtentDataRefs []ExtentDataRef

// Decode reads the refs of item b, whose size must be a multiple of 28.
func (rs *ExtentDataRefs) Decode(b []byte) error {
	if len(b)%ExtentDataRefSize != 0 {
		return Corruptf("extent data ref item of %d bytes is not a multiple of %d", len(b), ExtentDataRefSize)
	}
	out := make([]ExtentDataRef, len(b)/ExtentDataRefSize)
	for i := range out {
		_ = out[i].Decode(b[ExtentDataRefSize*i:])
	}
	*rs = out
	return nil
}

// Size is the item size.
func (rs *ExtentDataRefs) Size() int { return ExtentDataRefSize * len(*rs) }

// Encode writes the refs into b.
func (rs *ExtentDataRefs) Encode(b []byte) {
	for i := range *rs {
		(*rs)[i].Encode(b[ExtentDataRefSize*i:])
	}
}

// SharedDataRef is struct btrfs_shared_data_ref (4 bytes), the payload of a
// keyed SHARED_DATA_REF item (key offset = parent leaf).
type SharedDataRef struct {
	Count uint32 // 0x00
}

// Size returns SharedDataRefSize.
func (r *SharedDataRef) Size() int { return SharedDataRefSize }

// Decode reads a SharedDataRef from b.
func (r *SharedDataRef) Decode(b []byte) error {
	if len(b) < SharedDataRefSize {
		return shortErr("shared data ref", len(b), SharedDataRefSize)
	}
	r.Count = le.Uint32(b)
	return nil
}

// Encode writes r into b.
func (r *SharedDataRef) Encode(b []byte) { le.PutUint32(b[:SharedDataRefSize], r.Count) }

// InlineRef is one struct btrfs_extent_inline_ref inside an extent item: a
// type byte followed by a type-dependent body.
type InlineRef struct {
	// Type is TreeBlockRefKey, SharedBlockRefKey, ExtentDataRefKey,
	// SharedDataRefKey or ExtentOwnerRefKey.
	Type KeyType
	// Offset is the root id (TREE_BLOCK_REF, EXTENT_OWNER_REF) or the parent
	// block address (SHARED_BLOCK_REF, SHARED_DATA_REF); unused for
	// EXTENT_DATA_REF, whose body is Data.
	Offset uint64
	// Data is the body of an EXTENT_DATA_REF.
	Data ExtentDataRef
	// Count is the reference count of a SHARED_DATA_REF.
	Count uint32
}

// InlineRefSize is the encoded size of an inline ref of type t, 0 if t is
// not an inline ref type.
func InlineRefSize(t KeyType) int {
	switch t {
	case TreeBlockRefKey:
		return InlineTreeBlockRefSize
	case SharedBlockRefKey:
		return InlineSharedBlockRefSize
	case ExtentOwnerRefKey:
		return InlineOwnerRefSize
	case ExtentDataRefKey:
		return InlineExtentDataRefSize
	case SharedDataRefKey:
		return InlineSharedDataRefSize
	}
	return 0
}

// Size is the encoded size of r.
func (r *InlineRef) Size() int { return InlineRefSize(r.Type) }

// Seq is the value refs of one type are sorted by (descending): the data
// ref hash for EXTENT_DATA_REF, the offset field otherwise.
func (r *InlineRef) Seq() uint64 {
	if r.Type == ExtentDataRefKey {
		return r.Data.Hash()
	}
	return r.Offset
}

// RefCount is how many references r stands for: 1 for tree-block refs,
// the count for data refs, 0 for the owner ref (not a reference).
func (r *InlineRef) RefCount() uint64 {
	switch r.Type {
	case TreeBlockRefKey, SharedBlockRefKey:
		return 1
	case ExtentDataRefKey:
		return uint64(r.Data.Count)
	case SharedDataRefKey:
		return uint64(r.Count)
	}
	return 0
}

// decode reads one inline ref from the start of b, which begins at byte at
// of the item, and returns its size.
func (r *InlineRef) decode(b []byte, at int) (int, error) {
	if len(b) < InlineTreeBlockRefSize {
		return 0, Corruptf("extent item: inline ref at byte %d: %d bytes left, need %d", at, len(b), InlineTreeBlockRefSize)
	}
	*r = InlineRef{Type: KeyType(b[0])}
	n := InlineRefSize(r.Type)
	if n == 0 {
		return 0, Corruptf("extent item: inline ref at byte %d has unknown type %d", at, b[0])
	}
	if len(b) < n {
		return 0, Corruptf("extent item: inline ref %v at byte %d: %d bytes left, need %d", r.Type, at, len(b), n)
	}
	switch r.Type {
	case ExtentDataRefKey:
		_ = r.Data.Decode(b[1:])
	case SharedDataRefKey:
		r.Offset = le.Uint64(b[1:])
		r.Count = le.Uint32(b[9:])
	default:
		r.Offset = le.Uint64(b[1:])
	}
	return n, nil
}

// encode writes r into b, which must hold r.Size() bytes.
func (r *InlineRef) encode(b []byte) {
	n := r.Size()
	if n == 0 {
		panic(fmt.Sprintf("disk: encoding inline ref of type %v", r.Type))
	}
	b = b[:n]
	b[0] = byte(r.Type)
	switch r.Type {
	case ExtentDataRefKey:
		r.Data.Encode(b[1:])
	case SharedDataRefKey:
		le.PutUint64(b[1:], r.Offset)
		le.PutUint32(b[9:], r.Count)
	default:
		le.PutUint64(b[1:], r.Offset)
	}
}

// String prints the ref the way dump-tree words it.
func (r *InlineRef) String() string {
	switch r.Type {
	case TreeBlockRefKey:
		return fmt.Sprintf("tree block backref root %s", ObjectID(r.Offset).TreeName())
	case SharedBlockRefKey:
		return fmt.Sprintf("shared block backref parent %d", r.Offset)
	case ExtentDataRefKey:
		return fmt.Sprintf("extent data backref root %s objectid %d offset %d count %d",
			r.Data.Root.TreeName(), r.Data.ObjectID, r.Data.Offset, r.Data.Count)
	case SharedDataRefKey:
		return fmt.Sprintf("shared data backref parent %d count %d", r.Offset, r.Count)
	case ExtentOwnerRefKey:
		return fmt.Sprintf("extent owner root %s", ObjectID(r.Offset).TreeName())
	}
	return fmt.Sprintf("unknown inline ref type %d", uint8(r.Type))
}

// CompareInlineRefs orders inline refs as they must be stored: by type
// ascending, then by Seq descending. It returns -1 if a sorts first.
func CompareInlineRefs(a, b *InlineRef) int {
	switch {
	case a.Type != b.Type:
		if a.Type < b.Type {
			return -1
		}
		return 1
	case a.Seq() > b.Seq():
		return -1
	case a.Seq() < b.Seq():
		return 1
	}
	return 0
}

// SortInlineRefs puts refs into the required on-disk order.
func SortInlineRefs(refs []InlineRef) {
	slices.SortStableFunc(refs, func(a, b InlineRef) int { return CompareInlineRefs(&a, &b) })
}

// CheckInlineRefOrder reports the first pair of refs out of the required
// order (type ascending, Seq descending within a type; equal neighbours
// pass, as the kernel allows).
func CheckInlineRefOrder(refs []InlineRef) error {
	for i := 1; i < len(refs); i++ {
		if CompareInlineRefs(&refs[i-1], &refs[i]) > 0 {
			return Corruptf("inline ref %d (type %v seq %#x) out of order after type %v seq %#x",
				i, refs[i].Type, refs[i].Seq(), refs[i-1].Type, refs[i-1].Seq())
		}
	}
	return nil
}

// ExtentItem is struct btrfs_extent_item (24 bytes) with what follows it:
// the payload of EXTENT_ITEM (key (start, EXTENT_ITEM, length)) and of skinny
// METADATA_ITEM (key (block, METADATA_ITEM, level)) items.
type ExtentItem struct {
	Refs       uint64      // 0x00 total references
	Generation Generation  // 0x08 transid that allocated the extent
	Flags      ExtentFlags // 0x10
	// TreeBlock is the struct btrfs_tree_block_info at 0x18 that
	// EXTENT_ITEMs of tree blocks (non-skinny) carry; nil otherwise.
	TreeBlock *TreeBlockInfo
	// InlineRefs fill the rest of the item.
	InlineRefs []InlineRef
}

// Size is the encoded item size.
func (e *ExtentItem) Size() int {
	n := ExtentItemBaseSize
	if e.TreeBlock != nil {
		n += TreeBlockInfoSize
	}
	for i := range e.InlineRefs {
		n += e.InlineRefs[i].Size()
	}
	return n
}

// Decode reads the payload of an EXTENT_ITEM: a tree block info follows the
// base when Flags has TREE_BLOCK. Inline refs must fill b exactly.
func (e *ExtentItem) Decode(b []byte) error { return e.decode(b, false) }

// DecodeMetadata reads the payload of a skinny METADATA_ITEM (no tree
// block info; the level is in the key offset).
func (e *ExtentItem) DecodeMetadata(b []byte) error { return e.decode(b, true) }

// DecodeAs reads the payload for key type t (EXTENT_ITEM or METADATA_ITEM).
func (e *ExtentItem) DecodeAs(t KeyType, b []byte) error { return e.decode(b, t == MetadataItemKey) }

func (e *ExtentItem) decode(b []byte, skinny bool) error {
	if len(b) < ExtentItemBaseSize {
		return shortErr("extent item", len(b), ExtentItemBaseSize)
	}
	*e = ExtentItem{
		Refs:       le.Uint64(b),
		Generation: Generation(le.Uint64(b[8:])),
		Flags:      ExtentFlags(le.Uint64(b[16:])),
	}
	off := ExtentItemBaseSize
	if !skinny && e.Flags&ExtentFlagTreeBlock != 0 {
		if len(b) < off+TreeBlockInfoSize {
			return shortErr("extent item with tree block info", len(b), off+TreeBlockInfoSize)
		}
		e.TreeBlock = &TreeBlockInfo{Key: KeyAt(b[off:]), Level: b[off+KeySize]}
		off += TreeBlockInfoSize
	}
	// Every inline ref takes at least 9 bytes: bound the slice by that.
	e.InlineRefs = make([]InlineRef, 0, min((len(b)-off)/InlineTreeBlockRefSize, 16))
	for off < len(b) {
		var r InlineRef
		n, err := r.decode(b[off:], off)
		if err != nil {
			return err
		}
		e.InlineRefs = append(e.InlineRefs, r)
		off += n
	}
	return nil
}

// Encode writes e into b, which must hold e.Size() bytes.
func (e *ExtentItem) Encode(b []byte) {
	_ = b[e.Size()-1]
	le.PutUint64(b, e.Refs)
	le.PutUint64(b[8:], uint64(e.Generation))
	le.PutUint64(b[16:], uint64(e.Flags))
	off := ExtentItemBaseSize
	if e.TreeBlock != nil {
		e.TreeBlock.Key.Encode(b[off:])
		b[off+KeySize] = e.TreeBlock.Level
		off += TreeBlockInfoSize
	}
	for i := range e.InlineRefs {
		e.InlineRefs[i].encode(b[off:])
		off += e.InlineRefs[i].Size()
	}
}

// InlineRefCount sums RefCount over the inline refs; it must not exceed Refs.
func (e *ExtentItem) InlineRefCount() uint64 {
	var n uint64
	for i := range e.InlineRefs {
		n += e.InlineRefs[i].RefCount()
	}
	return n
}
