package disk

import "encoding/binary"

// DirLogItemSize is the size of struct btrfs_dir_log_item.
const DirLogItemSize = 8

// DirLogItem is struct btrfs_dir_log_item (8 bytes), found only in log
// trees: key (dir, DIR_LOG_INDEX, first) says the log holds every
// DIR_INDEX entry of dir whose index lies in [first, End], so an entry of
// the subvolume in that range that the log lacks was deleted before the
// fsync. Keyed DIR_LOG_ITEM (older kernels) the range is over DIR_ITEM
// name hashes instead.
type DirLogItem struct {
	End uint64 // 0x00 last index (or hash) of the range, inclusive
}

// Size returns DirLogItemSize.
func (d *DirLogItem) Size() int { return DirLogItemSize }

// Decode reads a DirLogItem from b.
func (d *DirLogItem) Decode(b []byte) error {
	if len(b) < DirLogItemSize {
		return shortErr("dir log item", len(b), DirLogItemSize)
	}
	d.End = binary.LittleEndian.Uint64(b)
	return nil
}

// Encode writes d into b.
func (d *DirLogItem) Encode(b []byte) { binary.LittleEndian.PutUint64(b, d.End) }
