package disk

import "fmt"

// DevExtentSize is the size of struct btrfs_dev_extent.
const DevExtentSize = 48

// DevExtent is struct btrfs_dev_extent (48 bytes): key (devid, DEV_EXTENT,
// physical start) in the dev tree; one stripe of a chunk on one device.
type DevExtent struct {
	ChunkTree     ObjectID    // 0x00 always ChunkTreeObjectID (3)
	ChunkObjectID ObjectID    // 0x08 always FirstChunkTreeObjectID (256)
	ChunkOffset   LogicalAddr // 0x10 logical start of the chunk
	Length        uint64      // 0x18 bytes on this device (the stripe size)
	ChunkTreeUUID UUID        // 0x20
}

// Size returns DevExtentSize.
func (d *DevExtent) Size() int { return DevExtentSize }

// Decode reads a DevExtent from b.
func (d *DevExtent) Decode(b []byte) error {
	if len(b) < DevExtentSize {
		return shortErr("dev extent", len(b), DevExtentSize)
	}
	d.ChunkTree = ObjectID(le.Uint64(b))
	d.ChunkObjectID = ObjectID(le.Uint64(b[8:]))
	d.ChunkOffset = LogicalAddr(le.Uint64(b[16:]))
	d.Length = le.Uint64(b[24:])
	copy(d.ChunkTreeUUID[:], b[32:48])
	return nil
}

// Encode writes d into b.
func (d *DevExtent) Encode(b []byte) {
	_ = b[DevExtentSize-1]
	le.PutUint64(b, uint64(d.ChunkTree))
	le.PutUint64(b[8:], uint64(d.ChunkObjectID))
	le.PutUint64(b[16:], uint64(d.ChunkOffset))
	le.PutUint64(b[24:], d.Length)
	copy(b[32:48], d.ChunkTreeUUID[:])
}

// String prints the item as dump-tree does, on one line.
func (d *DevExtent) String() string {
	return fmt.Sprintf("dev extent chunk_tree %d chunk_objectid %d chunk_offset %d length %d chunk_tree_uuid %s",
		d.ChunkTree, d.ChunkObjectID, d.ChunkOffset, d.Length, d.ChunkTreeUUID)
}
