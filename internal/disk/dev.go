package disk

// DevItemSize is the size of struct btrfs_dev_item.
const DevItemSize = 98

// DevItem is struct btrfs_dev_item: one device of the filesystem, stored in
// the chunk tree (key (DEV_ITEMS, DEV_ITEM, devid)) and in each device's
// superblock describing that device.
type DevItem struct {
	DevID       DevID      // 0x00
	TotalBytes  uint64     // 0x08
	BytesUsed   uint64     // 0x10
	IOAlign     uint32     // 0x18
	IOWidth     uint32     // 0x1c
	SectorSize  uint32     // 0x20
	Type        uint64     // 0x24
	Generation  Generation // 0x2c
	StartOffset uint64     // 0x34
	DevGroup    uint32     // 0x3c
	SeekSpeed   uint8      // 0x40
	Bandwidth   uint8      // 0x41
	UUID        UUID       // 0x42
	FSID        UUID       // 0x52
}

// Decode reads a DevItem from b.
func (d *DevItem) Decode(b []byte) error {
	if len(b) < DevItemSize {
		return shortErr("dev item", len(b), DevItemSize)
	}
	d.DevID = DevID(le.Uint64(b))
	d.TotalBytes = le.Uint64(b[8:])
	d.BytesUsed = le.Uint64(b[16:])
	d.IOAlign = le.Uint32(b[24:])
	d.IOWidth = le.Uint32(b[28:])
	d.SectorSize = le.Uint32(b[32:])
	d.Type = le.Uint64(b[36:])
	d.Generation = Generation(le.Uint64(b[44:]))
	d.StartOffset = le.Uint64(b[52:])
	d.DevGroup = le.Uint32(b[60:])
	d.SeekSpeed = b[64]
	d.Bandwidth = b[65]
	copy(d.UUID[:], b[66:82])
	copy(d.FSID[:], b[82:98])
	return nil
}

// Encode writes d into b.
func (d *DevItem) Encode(b []byte) {
	_ = b[DevItemSize-1]
	le.PutUint64(b, uint64(d.DevID))
	le.PutUint64(b[8:], d.TotalBytes)
	le.PutUint64(b[16:], d.BytesUsed)
	le.PutUint32(b[24:], d.IOAlign)
	le.PutUint32(b[28:], d.IOWidth)
	le.PutUint32(b[32:], d.SectorSize)
	le.PutUint64(b[36:], d.Type)
	le.PutUint64(b[44:], uint64(d.Generation))
	le.PutUint64(b[52:], d.StartOffset)
	le.PutUint32(b[60:], d.DevGroup)
	b[64] = d.SeekSpeed
	b[65] = d.Bandwidth
	copy(b[66:82], d.UUID[:])
	copy(b[82:98], d.FSID[:])
}
