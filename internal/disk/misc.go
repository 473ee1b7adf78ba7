package disk

import "fmt"

// Sizes of the small items.
const (
	DevStatsItemSize   = 40  // struct btrfs_dev_stats_item (5 counters)
	DevReplaceItemSize = 72  // struct btrfs_dev_replace_item
	BalanceArgsSize    = 136 // struct btrfs_disk_balance_args
	BalanceItemSize    = 448 // struct btrfs_balance_item
	VerityDescItemSize = 25  // struct btrfs_verity_descriptor_item
)

// EmptyItem is the payload of items whose key says everything and whose
// data is empty: ORPHAN_ITEM, FREE_SPACE_EXTENT, keyed TREE_BLOCK_REF and
// SHARED_BLOCK_REF, QGROUP_RELATION.
type EmptyItem struct{}

// Size returns 0.
func (EmptyItem) Size() int { return 0 }

// Decode accepts any b; CheckItem enforces the zero size.
func (*EmptyItem) Decode(b []byte) error { return nil }

// Encode writes nothing.
func (*EmptyItem) Encode(b []byte) {}

// StringItem is the payload of a STRING_ITEM (a debugging aid): raw bytes.
type StringItem []byte

// Decode copies b.
func (s *StringItem) Decode(b []byte) error {
	*s = cloneTight(b)
	return nil
}

// Size is the item size.
func (s *StringItem) Size() int { return len(*s) }

// Encode writes the bytes into b.
func (s *StringItem) Encode(b []byte) { copy(b[:len(*s)], *s) }

// DevStatsItem is struct btrfs_dev_stats_item (40 bytes): the I/O error
// counters of one device, key (DEV_STATS 0, PERSISTENT_ITEM, devid) in the
// dev tree.
type DevStatsItem struct {
	WriteErrs      uint64 // 0x00
	ReadErrs       uint64 // 0x08
	FlushErrs      uint64 // 0x10
	CorruptionErrs uint64 // 0x18 checksum or header errors
	GenerationErrs uint64 // 0x20 blocks with an unexpected generation
}

// Size returns DevStatsItemSize.
func (d *DevStatsItem) Size() int { return DevStatsItemSize }

// Decode reads a DevStatsItem from b.
func (d *DevStatsItem) Decode(b []byte) error {
	if len(b) < DevStatsItemSize {
		return shortErr("dev stats item", len(b), DevStatsItemSize)
	}
	d.WriteErrs, d.ReadErrs = le.Uint64(b), le.Uint64(b[8:])
	d.FlushErrs, d.CorruptionErrs = le.Uint64(b[16:]), le.Uint64(b[24:])
	d.GenerationErrs = le.Uint64(b[32:])
	return nil
}

// Encode writes d into b.
func (d *DevStatsItem) Encode(b []byte) {
	_ = b[DevStatsItemSize-1]
	le.PutUint64(b, d.WriteErrs)
	le.PutUint64(b[8:], d.ReadErrs)
	le.PutUint64(b[16:], d.FlushErrs)
	le.PutUint64(b[24:], d.CorruptionErrs)
	le.PutUint64(b[32:], d.GenerationErrs)
}

// String prints the counters as dump-tree does.
func (d *DevStatsItem) String() string {
	return fmt.Sprintf("write_errs %d read_errs %d flush_errs %d corruption_errs %d generation %d",
		d.WriteErrs, d.ReadErrs, d.FlushErrs, d.CorruptionErrs, d.GenerationErrs)
}

// UUIDKey returns the UUID-tree key of u: bytes 0..7 as the objectid and
// bytes 8..15 as the offset, both little-endian. t is UUIDKeySubvol or
// UUIDKeyReceivedSubvol.
func UUIDKey(u UUID, t KeyType) Key {
	return Key{ObjectID: ObjectID(le.Uint64(u[:8])), Type: t, Offset: le.Uint64(u[8:])}
}

// UUIDOfKey is the inverse of UUIDKey.
func UUIDOfKey(k Key) UUID {
	var u UUID
	le.PutUint64(u[:8], uint64(k.ObjectID))
	le.PutUint64(u[8:], k.Offset)
	return u
}

// UUIDItem is the payload of UUID_KEY_SUBVOL and UUID_KEY_RECEIVED_SUBVOL
// items: the ids of the subvolumes carrying that uuid, u64 each.
type UUIDItem []ObjectID

// Decode reads the ids of item b, whose size must be a multiple of 8.
func (u *UUIDItem) Decode(b []byte) error {
	if len(b)%8 != 0 {
		return Corruptf("uuid item of %d bytes is not a multiple of 8", len(b))
	}
	ids := make([]ObjectID, len(b)/8)
	for i := range ids {
		ids[i] = ObjectID(le.Uint64(b[8*i:]))
	}
	*u = ids
	return nil
}

// Size is the item size.
func (u *UUIDItem) Size() int { return 8 * len(*u) }

// Encode writes the ids into b.
func (u *UUIDItem) Encode(b []byte) {
	for i, id := range *u {
		le.PutUint64(b[8*i:], uint64(id))
	}
}

// VerityDescItem is struct btrfs_verity_descriptor_item (25 bytes): key
// (ino, VERITY_DESC_ITEM, 0); items at later offsets hold the descriptor.
type VerityDescItem struct {
	DescSize   uint64    // 0x00 size of the fs-verity descriptor held by the following items
	Reserved   [2]uint64 // 0x08 zero
	Encryption uint8     // 0x18 zero
}

// Size returns VerityDescItemSize.
func (v *VerityDescItem) Size() int { return VerityDescItemSize }

// Decode reads a VerityDescItem from b.
func (v *VerityDescItem) Decode(b []byte) error {
	if len(b) < VerityDescItemSize {
		return shortErr("verity descriptor item", len(b), VerityDescItemSize)
	}
	v.DescSize = le.Uint64(b)
	v.Reserved[0], v.Reserved[1] = le.Uint64(b[8:]), le.Uint64(b[16:])
	v.Encryption = b[24]
	return nil
}

// Encode writes v into b.
func (v *VerityDescItem) Encode(b []byte) {
	_ = b[VerityDescItemSize-1]
	le.PutUint64(b, v.DescSize)
	le.PutUint64(b[8:], v.Reserved[0])
	le.PutUint64(b[16:], v.Reserved[1])
	b[24] = v.Encryption
}

// Dev replace states (BTRFS_IOCTL_DEV_REPLACE_STATE_*).
const (
	DevReplaceNeverStarted uint64 = 0
	DevReplaceStarted      uint64 = 1
	DevReplaceFinished     uint64 = 2
	DevReplaceCanceled     uint64 = 3
	DevReplaceSuspended    uint64 = 4
)

// DevReplaceItem is struct btrfs_dev_replace_item (72 bytes): the progress
// of a device replace, key (0, DEV_REPLACE, 0) in the dev tree.
type DevReplaceItem struct {
	SrcDevID DevID // 0x00 device being replaced
	// CursorLeft and CursorRight bound the physical range of the source
	// device already copied.
	CursorLeft  uint64 // 0x08
	CursorRight uint64 // 0x10
	// ContReadingFromSrcdevMode: 0 always read from the source, 1 avoid it.
	ContReadingFromSrcdevMode  uint64 // 0x18
	ReplaceState               uint64 // 0x20 DevReplace*
	TimeStarted                uint64 // 0x28 seconds since the epoch
	TimeStopped                uint64 // 0x30 seconds since the epoch
	NumWriteErrors             uint64 // 0x38
	NumUncorrectableReadErrors uint64 // 0x40
}

// Size returns DevReplaceItemSize.
func (d *DevReplaceItem) Size() int { return DevReplaceItemSize }

func (d *DevReplaceItem) fields() []*uint64 {
	return []*uint64{(*uint64)(&d.SrcDevID), &d.CursorLeft, &d.CursorRight, &d.ContReadingFromSrcdevMode,
		&d.ReplaceState, &d.TimeStarted, &d.TimeStopped, &d.NumWriteErrors, &d.NumUncorrectableReadErrors}
}

// Decode reads a DevReplaceItem from b.
func (d *DevReplaceItem) Decode(b []byte) error {
	if len(b) < DevReplaceItemSize {
		return shortErr("dev replace item", len(b), DevReplaceItemSize)
	}
	for i, f := range d.fields() {
		*f = le.Uint64(b[8*i:])
	}
	return nil
}

// Encode writes d into b.
func (d *DevReplaceItem) Encode(b []byte) {
	_ = b[DevReplaceItemSize-1]
	for i, f := range d.fields() {
		le.PutUint64(b[8*i:], *f)
	}
}

// Balance item flags (BTRFS_BALANCE_*): which chunk types the balance covers.
const (
	BalanceData     uint64 = 1 << 0
	BalanceSystem   uint64 = 1 << 1
	BalanceMetadata uint64 = 1 << 2
	BalanceForce    uint64 = 1 << 3
	BalanceResume   uint64 = 1 << 4
)

// Balance filter flags (BTRFS_BALANCE_ARGS_*): which BalanceArgs fields apply.
const (
	BalanceArgsProfiles     uint64 = 1 << 0
	BalanceArgsUsage        uint64 = 1 << 1
	BalanceArgsDevID        uint64 = 1 << 2
	BalanceArgsDRange       uint64 = 1 << 3
	BalanceArgsVRange       uint64 = 1 << 4
	BalanceArgsLimit        uint64 = 1 << 5
	BalanceArgsLimitRange   uint64 = 1 << 6
	BalanceArgsStripesRange uint64 = 1 << 7
	BalanceArgsConvert      uint64 = 1 << 8
	BalanceArgsSoft         uint64 = 1 << 9
	BalanceArgsUsageRange   uint64 = 1 << 10
)

// BalanceArgs is struct btrfs_disk_balance_args (136 bytes): the filters of
// a balance for one chunk type.
type BalanceArgs struct {
	Profiles uint64 // 0x00
	// Usage is a percentage, or with BalanceArgsUsageRange two u32s
	// (min low, max high); see UsageRange.
	Usage  uint64 // 0x08
	DevID  DevID  // 0x10
	PStart uint64 // 0x18 physical range
	PEnd   uint64 // 0x20
	VStart uint64 // 0x28 logical range
	VEnd   uint64 // 0x30
	Target uint64 // 0x38 profile to convert to
	Flags  uint64 // 0x40 BalanceArgs*
	// Limit is a chunk count, or with BalanceArgsLimitRange two u32s
	// (min low, max high); see LimitRange.
	Limit      uint64    // 0x48
	StripesMin uint32    // 0x50
	StripesMax uint32    // 0x54
	Unused     [6]uint64 // 0x58
}

// UsageRange splits Usage into its min and max halves.
func (a *BalanceArgs) UsageRange() (lo, hi uint32) { return uint32(a.Usage), uint32(a.Usage >> 32) }

// LimitRange splits Limit into its min and max halves.
func (a *BalanceArgs) LimitRange() (lo, hi uint32) { return uint32(a.Limit), uint32(a.Limit >> 32) }

func (a *BalanceArgs) words() []*uint64 {
	return []*uint64{&a.Profiles, &a.Usage, (*uint64)(&a.DevID), &a.PStart, &a.PEnd,
		&a.VStart, &a.VEnd, &a.Target, &a.Flags, &a.Limit}
}

func (a *BalanceArgs) decode(b []byte) {
	for i, f := range a.words() {
		*f = le.Uint64(b[8*i:])
	}
	a.StripesMin, a.StripesMax = le.Uint32(b[0x50:]), le.Uint32(b[0x54:])
	for i := range a.Unused {
		a.Unused[i] = le.Uint64(b[0x58+8*i:])
	}
}

func (a *BalanceArgs) encode(b []byte) {
	_ = b[BalanceArgsSize-1]
	for i, f := range a.words() {
		le.PutUint64(b[8*i:], *f)
	}
	le.PutUint32(b[0x50:], a.StripesMin)
	le.PutUint32(b[0x54:], a.StripesMax)
	for i, v := range a.Unused {
		le.PutUint64(b[0x58+8*i:], v)
	}
}

// BalanceItem is struct btrfs_balance_item (448 bytes): a paused or running
// balance, key (BALANCE -4, TEMPORARY_ITEM, 0) in the root tree.
type BalanceItem struct {
	Flags  uint64      // 0x000 Balance*
	Data   BalanceArgs // 0x008
	Meta   BalanceArgs // 0x090
	Sys    BalanceArgs // 0x118
	Unused [4]uint64   // 0x1a0
}

// Size returns BalanceItemSize.
func (bi *BalanceItem) Size() int { return BalanceItemSize }

// Decode reads a BalanceItem from b.
func (bi *BalanceItem) Decode(b []byte) error {
	if len(b) < BalanceItemSize {
		return shortErr("balance item", len(b), BalanceItemSize)
	}
	bi.Flags = le.Uint64(b)
	bi.Data.decode(b[0x008:])
	bi.Meta.decode(b[0x090:])
	bi.Sys.decode(b[0x118:])
	for i := range bi.Unused {
		bi.Unused[i] = le.Uint64(b[0x1a0+8*i:])
	}
	return nil
}

// Encode writes bi into b.
func (bi *BalanceItem) Encode(b []byte) {
	_ = b[BalanceItemSize-1]
	le.PutUint64(b, bi.Flags)
	bi.Data.encode(b[0x008:])
	bi.Meta.encode(b[0x090:])
	bi.Sys.encode(b[0x118:])
	for i, v := range bi.Unused {
		le.PutUint64(b[0x1a0+8*i:], v)
	}
}
