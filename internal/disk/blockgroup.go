package disk

import "fmt"

// BlockGroupItemSize is the size of struct btrfs_block_group_item.
const BlockGroupItemSize = 24

// BlockGroupItem is struct btrfs_block_group_item (24 bytes): key (start,
// BLOCK_GROUP_ITEM, length) in the extent tree (or the block-group tree);
// start and length match a chunk exactly.
type BlockGroupItem struct {
	Used          uint64   // 0x00 bytes allocated to extents in the group
	ChunkObjectID ObjectID // 0x08 always FirstChunkTreeObjectID (256)
	Flags         uint64   // 0x10 the chunk's type and profile bits
}

// Size returns BlockGroupItemSize.
func (bg *BlockGroupItem) Size() int { return BlockGroupItemSize }

// Decode reads a BlockGroupItem from b.
func (bg *BlockGroupItem) Decode(b []byte) error {
	if len(b) < BlockGroupItemSize {
		return shortErr("block group item", len(b), BlockGroupItemSize)
	}
	bg.Used = le.Uint64(b)
	bg.ChunkObjectID = ObjectID(le.Uint64(b[8:]))
	bg.Flags = le.Uint64(b[16:])
	return nil
}

// Encode writes bg into b.
func (bg *BlockGroupItem) Encode(b []byte) {
	_ = b[BlockGroupItemSize-1]
	le.PutUint64(b, bg.Used)
	le.PutUint64(b[8:], uint64(bg.ChunkObjectID))
	le.PutUint64(b[16:], bg.Flags)
}

// String prints the item as dump-tree does ("flags DATA|single").
func (bg *BlockGroupItem) String() string {
	return fmt.Sprintf("block group used %d chunk_objectid %d flags %s",
		bg.Used, bg.ChunkObjectID, BlockGroupTypeString(bg.Flags))
}

// BlockGroupTypeString prints block group or chunk type bits the way
// dump-tree does, naming the SINGLE profile explicitly: "DATA|single",
// "METADATA|DUP".
func BlockGroupTypeString(f uint64) string {
	s := BlockGroupFlagsString(f)
	if f&BlockGroupProfileMask == 0 {
		s += "|single"
	}
	return s
}
