package disk

import (
	"fmt"
	"strings"
)

// Sizes of struct btrfs_chunk without stripes, and of struct btrfs_stripe.
const (
	ChunkItemBaseSize = 48
	StripeSize        = 32
	// StripeLen is BTRFS_STRIPE_LEN, the only stripe length btrfs uses.
	StripeLen = 65536
)

// Block group and chunk type bits (BTRFS_BLOCK_GROUP_*).
const (
	BlockGroupData     uint64 = 1 << 0
	BlockGroupSystem   uint64 = 1 << 1
	BlockGroupMetadata uint64 = 1 << 2
	BlockGroupRAID0    uint64 = 1 << 3
	BlockGroupRAID1    uint64 = 1 << 4
	BlockGroupDUP      uint64 = 1 << 5
	BlockGroupRAID10   uint64 = 1 << 6
	BlockGroupRAID5    uint64 = 1 << 7
	BlockGroupRAID6    uint64 = 1 << 8
	BlockGroupRAID1C3  uint64 = 1 << 9
	BlockGroupRAID1C4  uint64 = 1 << 10

	BlockGroupTypeMask    = BlockGroupData | BlockGroupSystem | BlockGroupMetadata
	BlockGroupProfileMask = BlockGroupRAID0 | BlockGroupRAID1 | BlockGroupDUP | BlockGroupRAID10 |
		BlockGroupRAID5 | BlockGroupRAID6 | BlockGroupRAID1C3 | BlockGroupRAID1C4
)

// BlockGroupFlagsString prints type and profile as btrfs-progs does, e.g.
// "DATA", "METADATA|DUP", "SYSTEM|RAID1".
func BlockGroupFlagsString(f uint64) string {
	var parts []string
	names := []struct {
		bit  uint64
		name string
	}{
		{BlockGroupData, "DATA"}, {BlockGroupSystem, "SYSTEM"}, {BlockGroupMetadata, "METADATA"},
		{BlockGroupRAID0, "RAID0"}, {BlockGroupRAID1, "RAID1"}, {BlockGroupDUP, "DUP"},
		{BlockGroupRAID10, "RAID10"}, {BlockGroupRAID5, "RAID5"}, {BlockGroupRAID6, "RAID6"},
		{BlockGroupRAID1C3, "RAID1C3"}, {BlockGroupRAID1C4, "RAID1C4"},
	}
	for _, n := range names {
		if f&n.bit != 0 {
			parts = append(parts, n.name)
			f &^= n.bit
		}
	}
	if f != 0 {
		parts = append(parts, fmt.Sprintf("0x%x", f))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// ProfileName names the profile bits of f: single, dup, raid0, ...
func ProfileName(f uint64) string {
	switch f & BlockGroupProfileMask {
	case 0:
		return "single"
	case BlockGroupDUP:
		return "dup"
	case BlockGroupRAID0:
		return "raid0"
	case BlockGroupRAID1:
		return "raid1"
	case BlockGroupRAID10:
		return "raid10"
	case BlockGroupRAID5:
		return "raid5"
	case BlockGroupRAID6:
		return "raid6"
	case BlockGroupRAID1C3:
		return "raid1c3"
	case BlockGroupRAID1C4:
		return "raid1c4"
	}
	return "unknown"
}

// Stripe is struct btrfs_stripe: one device range of a chunk.
type Stripe struct {
	DevID   DevID        // 0x00
	Offset  PhysicalAddr // 0x08
	DevUUID UUID         // 0x10
}

// ChunkItem is struct btrfs_chunk followed by its stripes: one logical range
// and the device ranges that store it.
type ChunkItem struct {
	Length     uint64   // 0x00 logical bytes
	Owner      ObjectID // 0x08 always the extent tree id
	StripeLen  uint64   // 0x10
	Type       uint64   // 0x18 block group flags
	IOAlign    uint32   // 0x20
	IOWidth    uint32   // 0x24
	SectorSize uint32   // 0x28
	NumStripes uint16   // 0x2c
	SubStripes uint16   // 0x2e
	Stripes    []Stripe // 0x30, NumStripes entries
}

// ChunkItemSize is the encoded size of a chunk with n stripes.
func ChunkItemSize(n int) int { return ChunkItemBaseSize + StripeSize*n }

// Size is the encoded size of c.
func (c *ChunkItem) Size() int { return ChunkItemSize(len(c.Stripes)) }

// Decode reads a ChunkItem from b, which may be longer than the item (as in
// the sys_chunk_array); it consumes exactly ChunkItemSize(NumStripes) bytes.
func (c *ChunkItem) Decode(b []byte) error {
	if len(b) < ChunkItemBaseSize {
		return shortErr("chunk item", len(b), ChunkItemBaseSize)
	}
	c.Length = le.Uint64(b)
	c.Owner = ObjectID(le.Uint64(b[8:]))
	c.StripeLen = le.Uint64(b[16:])
	c.Type = le.Uint64(b[24:])
	c.IOAlign = le.Uint32(b[32:])
	c.IOWidth = le.Uint32(b[36:])
	c.SectorSize = le.Uint32(b[40:])
	c.NumStripes = le.Uint16(b[44:])
	c.SubStripes = le.Uint16(b[46:])
	if c.NumStripes == 0 {
		return Corruptf("chunk item with no stripes")
	}
	if need := ChunkItemSize(int(c.NumStripes)); len(b) < need {
		return shortErr("chunk item", len(b), need)
	}
	c.Stripes = make([]Stripe, c.NumStripes)
	for i := range c.Stripes {
		p := b[ChunkItemBaseSize+StripeSize*i:]
		c.Stripes[i].DevID = DevID(le.Uint64(p))
		c.Stripes[i].Offset = PhysicalAddr(le.Uint64(p[8:]))
		copy(c.Stripes[i].DevUUID[:], p[16:32])
	}
	return nil
}

// Encode writes c into b; NumStripes is taken from len(c.Stripes).
func (c *ChunkItem) Encode(b []byte) {
	_ = b[c.Size()-1]
	le.PutUint64(b, c.Length)
	le.PutUint64(b[8:], uint64(c.Owner))
	le.PutUint64(b[16:], c.StripeLen)
	le.PutUint64(b[24:], c.Type)
	le.PutUint32(b[32:], c.IOAlign)
	le.PutUint32(b[36:], c.IOWidth)
	le.PutUint32(b[40:], c.SectorSize)
	le.PutUint16(b[44:], uint16(len(c.Stripes)))
	le.PutUint16(b[46:], c.SubStripes)
	for i, s := range c.Stripes {
		p := b[ChunkItemBaseSize+StripeSize*i:]
		le.PutUint64(p, uint64(s.DevID))
		le.PutUint64(p[8:], uint64(s.Offset))
		copy(p[16:32], s.DevUUID[:])
	}
}

// Validate applies the tree-checker's chunk rules: non-zero aligned length,
// the standard stripe length, one type, and a stripe count that fits the
// profile. logical is the chunk's key offset.
func (c *ChunkItem) Validate(logical LogicalAddr, sectorSize uint32) error {
	switch {
	case c.Length == 0:
		return Corruptf("chunk %d: zero length", logical)
	case sectorSize != 0 && (c.Length%uint64(sectorSize) != 0 || uint64(logical)%uint64(sectorSize) != 0):
		return Corruptf("chunk %d: length %d or start not sector aligned", logical, c.Length)
	case c.StripeLen != StripeLen:
		return Corruptf("chunk %d: stripe length %d, want %d", logical, c.StripeLen, StripeLen)
	case c.Type&BlockGroupTypeMask == 0:
		return Corruptf("chunk %d: no type in flags 0x%x", logical, c.Type)
	case c.Type&BlockGroupSystem != 0 && c.Type&(BlockGroupData|BlockGroupMetadata) != 0:
		return Corruptf("chunk %d: system mixed with data or metadata", logical)
	}
	prof := c.Type & BlockGroupProfileMask
	if prof&(prof-1) != 0 {
		return Corruptf("chunk %d: several profiles in flags 0x%x", logical, c.Type)
	}
	n := len(c.Stripes)
	ok := true
	switch prof {
	case 0:
		ok = n == 1
	case BlockGroupDUP, BlockGroupRAID1:
		ok = n == 2
	case BlockGroupRAID1C3:
		ok = n == 3
	case BlockGroupRAID1C4:
		ok = n == 4
	case BlockGroupRAID0:
		ok = n >= 1
	case BlockGroupRAID10:
		ok = c.SubStripes == 2 && n >= 2 && n%2 == 0
	case BlockGroupRAID5:
		ok = n >= 2
	case BlockGroupRAID6:
		ok = n >= 3
	}
	if !ok {
		return Corruptf("chunk %d: %d stripes (sub %d) do not fit profile %s", logical, n, c.SubStripes, ProfileName(c.Type))
	}
	return nil
}
