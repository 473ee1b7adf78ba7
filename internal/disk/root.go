package disk

import "fmt"

// Sizes of struct btrfs_root_item and struct btrfs_root_ref.
const (
	RootItemSize = 439
	// RootItemLegacySize is the size of root items written before the
	// generation_v2/uuid/times fields existed; readers still accept it.
	RootItemLegacySize = 239
	RootRefBaseSize    = 18
)

// RootFlags is the flags word of a root item.
type RootFlags uint64

// Root item flags.
const (
	RootSubvolReadonly RootFlags = 1 << 0  // BTRFS_ROOT_SUBVOL_RDONLY
	RootSubvolDead     RootFlags = 1 << 48 // BTRFS_ROOT_SUBVOL_DEAD: being deleted
	// RootFlagsValid holds the flags the tree-checker accepts.
	RootFlagsValid = RootSubvolReadonly | RootSubvolDead
)

var rootFlagNames = []flagName{{uint64(RootSubvolReadonly), "RDONLY"}, {uint64(RootSubvolDead), "DEAD"}}

// String prints "none", "RDONLY", ... as dump-tree does.
func (f RootFlags) String() string { return flagsString(uint64(f), rootFlagNames) }

// IsFSTree reports whether id names a subvolume tree (the top-level tree 5
// or a subvolume id in [256, 2^48)), the trees that hold inodes.
func (id ObjectID) IsFSTree() bool {
	return id == FSTreeObjectID || (id >= FirstFreeObjectID && id>>48 == 0)
}

// RootItem is struct btrfs_root_item (439 bytes, or 239 in legacy items):
// one tree's root, key (tree id, ROOT_ITEM, 0 or snapshot transid) in the
// root tree.
type RootItem struct {
	Inode        InodeItem   // 0x000 unused by readers
	Generation   Generation  // 0x0a0 header generation of the root block
	RootDirID    ObjectID    // 0x0a8 256 for subvolumes, else 0
	Bytenr       LogicalAddr // 0x0b0 root block
	ByteLimit    uint64      // 0x0b8
	BytesUsed    uint64      // 0x0c0
	LastSnapshot Generation  // 0x0c8
	Flags        RootFlags   // 0x0d0
	Refs         uint32      // 0x0d8
	DropProgress Key         // 0x0dc
	DropLevel    uint8       // 0x0ed
	Level        uint8       // 0x0ee level of the root block
	// Fields below are absent from legacy items (Legacy true).
	GenerationV2 Generation // 0x0ef equals Generation when the fields below are current
	UUID         UUID       // 0x0f7
	ParentUUID   UUID       // 0x107
	ReceivedUUID UUID       // 0x117
	CTransID     Generation // 0x127
	OTransID     Generation // 0x12f
	STransID     Generation // 0x137
	RTransID     Generation // 0x13f
	CTime        Timespec   // 0x147
	OTime        Timespec   // 0x153
	STime        Timespec   // 0x15f
	RTime        Timespec   // 0x16b
	Reserved     [8]uint64  // 0x177

	// Legacy records that the item was decoded from a 239-byte item;
	// Encode then writes 239 bytes so the item keeps its size.
	Legacy bool
}

// Size is the encoded size: RootItemLegacySize if Legacy, else RootItemSize.
func (r *RootItem) Size() int {
	if r.Legacy {
		return RootItemLegacySize
	}
	return RootItemSize
}

// Decode reads a root item. b of exactly 239 bytes is a legacy item; any
// other b must hold at least 439 bytes.
func (r *RootItem) Decode(b []byte) error {
	legacy := len(b) == RootItemLegacySize
	if !legacy && len(b) < RootItemSize {
		return Corruptf("root item: %d bytes, need %d or %d", len(b), RootItemLegacySize, RootItemSize)
	}
	*r = RootItem{Legacy: legacy}
	_ = r.Inode.Decode(b)
	r.Generation = Generation(le.Uint64(b[0xa0:]))
	r.RootDirID = ObjectID(le.Uint64(b[0xa8:]))
	r.Bytenr = LogicalAddr(le.Uint64(b[0xb0:]))
	r.ByteLimit = le.Uint64(b[0xb8:])
	r.BytesUsed = le.Uint64(b[0xc0:])
	r.LastSnapshot = Generation(le.Uint64(b[0xc8:]))
	r.Flags = RootFlags(le.Uint64(b[0xd0:]))
	r.Refs = le.Uint32(b[0xd8:])
	r.DropProgress = KeyAt(b[0xdc:])
	r.DropLevel = b[0xed]
	r.Level = b[0xee]
	if legacy {
		return nil
	}
	r.GenerationV2 = Generation(le.Uint64(b[0xef:]))
	copy(r.UUID[:], b[0xf7:])
	copy(r.ParentUUID[:], b[0x107:])
	copy(r.ReceivedUUID[:], b[0x117:])
	r.CTransID = Generation(le.Uint64(b[0x127:]))
	r.OTransID = Generation(le.Uint64(b[0x12f:]))
	r.STransID = Generation(le.Uint64(b[0x137:]))
	r.RTransID = Generation(le.Uint64(b[0x13f:]))
	_ = r.CTime.Decode(b[0x147:])
	_ = r.OTime.Decode(b[0x153:])
	_ = r.STime.Decode(b[0x15f:])
	_ = r.RTime.Decode(b[0x16b:])
	for i := range r.Reserved {
		r.Reserved[i] = le.Uint64(b[0x177+8*i:])
	}
	return nil
}

// Encode writes r into b, which must hold r.Size() bytes.
func (r *RootItem) Encode(b []byte) {
	_ = b[r.Size()-1]
	r.Inode.Encode(b)
	le.PutUint64(b[0xa0:], uint64(r.Generation))
	le.PutUint64(b[0xa8:], uint64(r.RootDirID))
	le.PutUint64(b[0xb0:], uint64(r.Bytenr))
	le.PutUint64(b[0xb8:], r.ByteLimit)
	le.PutUint64(b[0xc0:], r.BytesUsed)
	le.PutUint64(b[0xc8:], uint64(r.LastSnapshot))
	le.PutUint64(b[0xd0:], uint64(r.Flags))
	le.PutUint32(b[0xd8:], r.Refs)
	r.DropProgress.Encode(b[0xdc:])
	b[0xed] = r.DropLevel
	b[0xee] = r.Level
	if r.Legacy {
		return
	}
	le.PutUint64(b[0xef:], uint64(r.GenerationV2))
	copy(b[0xf7:], r.UUID[:])
	copy(b[0x107:], r.ParentUUID[:])
	copy(b[0x117:], r.ReceivedUUID[:])
	le.PutUint64(b[0x127:], uint64(r.CTransID))
	le.PutUint64(b[0x12f:], uint64(r.OTransID))
	le.PutUint64(b[0x137:], uint64(r.STransID))
	le.PutUint64(b[0x13f:], uint64(r.RTransID))
	r.CTime.Encode(b[0x147:])
	r.OTime.Encode(b[0x153:])
	r.STime.Encode(b[0x15f:])
	r.RTime.Encode(b[0x16b:])
	for i, v := range r.Reserved {
		le.PutUint64(b[0x177+8*i:], v)
	}
}

// String prints the main fields on one line, in dump-tree's words.
func (r *RootItem) String() string {
	return fmt.Sprintf("generation %d root_dirid %d bytenr %d byte_limit %d bytes_used %d last_snapshot %d flags 0x%x(%v) refs %d drop_progress key %v drop_level %d level %d generation_v2 %d",
		r.Generation, r.RootDirID, r.Bytenr, r.ByteLimit, r.BytesUsed, r.LastSnapshot,
		uint64(r.Flags), r.Flags, r.Refs, r.DropProgress, r.DropLevel, r.Level, r.GenerationV2)
}

// RootRef is struct btrfs_root_ref (18 bytes + name): the payload of
// ROOT_REF (key (parent, ROOT_REF, child)) and ROOT_BACKREF (key (child,
// ROOT_BACKREF, parent)) items, naming the directory entry of a subvolume.
type RootRef struct {
	DirID    ObjectID // 0x00 directory in the parent subvolume
	Sequence uint64   // 0x08 DIR_INDEX of the entry
	Name     []byte   // 0x12, length in the u16 at 0x10
}

// Size is the encoded size.
func (r *RootRef) Size() int { return RootRefBaseSize + len(r.Name) }

// Decode reads a root ref from the start of b (the name is copied).
func (r *RootRef) Decode(b []byte) error {
	if len(b) < RootRefBaseSize {
		return shortErr("root ref", len(b), RootRefBaseSize)
	}
	n := int(le.Uint16(b[16:]))
	if len(b) < RootRefBaseSize+n {
		return Corruptf("root ref: name of %d bytes overruns item of %d", n, len(b))
	}
	r.DirID = ObjectID(le.Uint64(b))
	r.Sequence = le.Uint64(b[8:])
	r.Name = cloneTight(b[RootRefBaseSize : RootRefBaseSize+n])
	return nil
}

// Encode writes r into b.
func (r *RootRef) Encode(b []byte) {
	_ = b[r.Size()-1]
	le.PutUint64(b, uint64(r.DirID))
	le.PutUint64(b[8:], r.Sequence)
	le.PutUint16(b[16:], nameLen16(r.Name))
	copy(b[RootRefBaseSize:], r.Name)
}
