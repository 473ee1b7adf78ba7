package disk

import "fmt"

// KeySize is the size of struct btrfs_disk_key.
const KeySize = 17

// Key is struct btrfs_disk_key: items are ordered by (ObjectID, Type, Offset),
// all compared unsigned.
type Key struct {
	ObjectID ObjectID // 0x00
	Type     KeyType  // 0x08
	Offset   uint64   // 0x09
}

// Decode reads a Key from b.
func (k *Key) Decode(b []byte) error {
	if len(b) < KeySize {
		return shortErr("key", len(b), KeySize)
	}
	k.ObjectID = ObjectID(le.Uint64(b))
	k.Type = KeyType(b[8])
	k.Offset = le.Uint64(b[9:])
	return nil
}

// KeyAt decodes the key at the start of b, which must hold KeySize bytes.
func KeyAt(b []byte) Key {
	_ = b[KeySize-1]
	return Key{ObjectID(le.Uint64(b)), KeyType(b[8]), le.Uint64(b[9:])}
}

// Encode writes k into b.
func (k Key) Encode(b []byte) {
	_ = b[KeySize-1]
	le.PutUint64(b, uint64(k.ObjectID))
	b[8] = byte(k.Type)
	le.PutUint64(b[9:], k.Offset)
}

// Compare orders keys: -1 if k < o, 0 if equal, +1 if k > o.
func (k Key) Compare(o Key) int {
	switch {
	case k.ObjectID < o.ObjectID:
		return -1
	case k.ObjectID > o.ObjectID:
		return 1
	case k.Type < o.Type:
		return -1
	case k.Type > o.Type:
		return 1
	case k.Offset < o.Offset:
		return -1
	case k.Offset > o.Offset:
		return 1
	}
	return 0
}

// Less reports k < o.
func (k Key) Less(o Key) bool { return k.Compare(o) < 0 }

// String prints the key as (objectid type offset) with numbers and the type name.
func (k Key) String() string {
	return fmt.Sprintf("(%d %s %d)", uint64(k.ObjectID), k.Type, k.Offset)
}

// MaxKey is the largest possible key.
var MaxKey = Key{ObjectID: ^ObjectID(0), Type: 0xff, Offset: ^uint64(0)}

// KeyType is the type byte of a key; it says what the item holds.
type KeyType uint8

// Item types (the type byte of a key).
const (
	InodeItemKey          KeyType = 1   // BTRFS_INODE_ITEM_KEY
	InodeRefKey           KeyType = 12  // BTRFS_INODE_REF_KEY
	InodeExtrefKey        KeyType = 13  // BTRFS_INODE_EXTREF_KEY
	XattrItemKey          KeyType = 24  // BTRFS_XATTR_ITEM_KEY
	VerityDescItemKey     KeyType = 36  // BTRFS_VERITY_DESC_ITEM_KEY
	VerityMerkleItemKey   KeyType = 37  // BTRFS_VERITY_MERKLE_ITEM_KEY
	OrphanItemKey         KeyType = 48  // BTRFS_ORPHAN_ITEM_KEY
	DirLogItemKey         KeyType = 60  // BTRFS_DIR_LOG_ITEM_KEY
	DirLogIndexKey        KeyType = 72  // BTRFS_DIR_LOG_INDEX_KEY
	DirItemKey            KeyType = 84  // BTRFS_DIR_ITEM_KEY
	DirIndexKey           KeyType = 96  // BTRFS_DIR_INDEX_KEY
	ExtentDataKey         KeyType = 108 // BTRFS_EXTENT_DATA_KEY
	ExtentCsumKey         KeyType = 128 // BTRFS_EXTENT_CSUM_KEY
	RootItemKey           KeyType = 132 // BTRFS_ROOT_ITEM_KEY
	RootBackrefKey        KeyType = 144 // BTRFS_ROOT_BACKREF_KEY
	RootRefKey            KeyType = 156 // BTRFS_ROOT_REF_KEY
	ExtentItemKey         KeyType = 168 // BTRFS_EXTENT_ITEM_KEY
	MetadataItemKey       KeyType = 169 // BTRFS_METADATA_ITEM_KEY
	ExtentOwnerRefKey     KeyType = 172 // BTRFS_EXTENT_OWNER_REF_KEY
	TreeBlockRefKey       KeyType = 176 // BTRFS_TREE_BLOCK_REF_KEY
	ExtentDataRefKey      KeyType = 178 // BTRFS_EXTENT_DATA_REF_KEY
	ExtentRefV0Key        KeyType = 180 // BTRFS_EXTENT_REF_V0_KEY (obsolete)
	SharedBlockRefKey     KeyType = 182 // BTRFS_SHARED_BLOCK_REF_KEY
	SharedDataRefKey      KeyType = 184 // BTRFS_SHARED_DATA_REF_KEY
	BlockGroupItemKey     KeyType = 192 // BTRFS_BLOCK_GROUP_ITEM_KEY
	FreeSpaceInfoKey      KeyType = 198 // BTRFS_FREE_SPACE_INFO_KEY
	FreeSpaceExtentKey    KeyType = 199 // BTRFS_FREE_SPACE_EXTENT_KEY
	FreeSpaceBitmapKey    KeyType = 200 // BTRFS_FREE_SPACE_BITMAP_KEY
	DevExtentKey          KeyType = 204 // BTRFS_DEV_EXTENT_KEY
	DevItemKey            KeyType = 216 // BTRFS_DEV_ITEM_KEY
	ChunkItemKey          KeyType = 228 // BTRFS_CHUNK_ITEM_KEY
	RaidStripeKey         KeyType = 230 // BTRFS_RAID_STRIPE_KEY
	QgroupStatusKey       KeyType = 240 // BTRFS_QGROUP_STATUS_KEY
	QgroupInfoKey         KeyType = 242 // BTRFS_QGROUP_INFO_KEY
	QgroupLimitKey        KeyType = 244 // BTRFS_QGROUP_LIMIT_KEY
	QgroupRelationKey     KeyType = 246 // BTRFS_QGROUP_RELATION_KEY
	TemporaryItemKey      KeyType = 248 // BTRFS_TEMPORARY_ITEM_KEY (balance status)
	PersistentItemKey     KeyType = 249 // BTRFS_PERSISTENT_ITEM_KEY (dev stats)
	DevReplaceKey         KeyType = 250 // BTRFS_DEV_REPLACE_KEY
	UUIDKeySubvol         KeyType = 251 // BTRFS_UUID_KEY_SUBVOL
	UUIDKeyReceivedSubvol KeyType = 252 // BTRFS_UUID_KEY_RECEIVED_SUBVOL
	StringItemKey         KeyType = 253 // BTRFS_STRING_ITEM_KEY
)

var keyTypeNames = map[KeyType]string{
	InodeItemKey: "INODE_ITEM", InodeRefKey: "INODE_REF", InodeExtrefKey: "INODE_EXTREF",
	XattrItemKey: "XATTR_ITEM", VerityDescItemKey: "VERITY_DESC_ITEM",
	VerityMerkleItemKey: "VERITY_MERKLE_ITEM", OrphanItemKey: "ORPHAN_ITEM",
	DirLogItemKey: "DIR_LOG_ITEM", DirLogIndexKey: "DIR_LOG_INDEX", DirItemKey: "DIR_ITEM",
	DirIndexKey: "DIR_INDEX", ExtentDataKey: "EXTENT_DATA", ExtentCsumKey: "EXTENT_CSUM",
	RootItemKey: "ROOT_ITEM", RootBackrefKey: "ROOT_BACKREF", RootRefKey: "ROOT_REF",
	ExtentItemKey: "EXTENT_ITEM", MetadataItemKey: "METADATA_ITEM",
	ExtentOwnerRefKey: "EXTENT_OWNER_REF", TreeBlockRefKey: "TREE_BLOCK_REF",
	ExtentDataRefKey: "EXTENT_DATA_REF", ExtentRefV0Key: "EXTENT_REF_V0",
	SharedBlockRefKey: "SHARED_BLOCK_REF", SharedDataRefKey: "SHARED_DATA_REF",
	BlockGroupItemKey: "BLOCK_GROUP_ITEM", FreeSpaceInfoKey: "FREE_SPACE_INFO",
	FreeSpaceExtentKey: "FREE_SPACE_EXTENT", FreeSpaceBitmapKey: "FREE_SPACE_BITMAP",
	DevExtentKey: "DEV_EXTENT", DevItemKey: "DEV_ITEM", ChunkItemKey: "CHUNK_ITEM",
	RaidStripeKey: "RAID_STRIPE", QgroupStatusKey: "QGROUP_STATUS", QgroupInfoKey: "QGROUP_INFO",
	QgroupLimitKey: "QGROUP_LIMIT", QgroupRelationKey: "QGROUP_RELATION",
	TemporaryItemKey: "TEMPORARY_ITEM", PersistentItemKey: "PERSISTENT_ITEM",
	DevReplaceKey: "DEV_REPLACE", UUIDKeySubvol: "UUID_KEY_SUBVOL",
	UUIDKeyReceivedSubvol: "UUID_KEY_RECEIVED_SUBVOL", StringItemKey: "STRING_ITEM",
}

// String returns the btrfs-progs name of the type, or UNKNOWN.N.
func (t KeyType) String() string {
	if s, ok := keyTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("UNKNOWN.%d", uint8(t))
}

// Well-known object ids and tree ids.
const (
	DevStatsObjectID       ObjectID = 0  // BTRFS_DEV_STATS_OBJECTID
	RootTreeObjectID       ObjectID = 1  // BTRFS_ROOT_TREE_OBJECTID
	ExtentTreeObjectID     ObjectID = 2  // BTRFS_EXTENT_TREE_OBJECTID
	ChunkTreeObjectID      ObjectID = 3  // BTRFS_CHUNK_TREE_OBJECTID
	DevTreeObjectID        ObjectID = 4  // BTRFS_DEV_TREE_OBJECTID
	FSTreeObjectID         ObjectID = 5  // BTRFS_FS_TREE_OBJECTID
	RootTreeDirObjectID    ObjectID = 6  // BTRFS_ROOT_TREE_DIR_OBJECTID
	CsumTreeObjectID       ObjectID = 7  // BTRFS_CSUM_TREE_OBJECTID
	QuotaTreeObjectID      ObjectID = 8  // BTRFS_QUOTA_TREE_OBJECTID
	UUIDTreeObjectID       ObjectID = 9  // BTRFS_UUID_TREE_OBJECTID
	FreeSpaceTreeObjectID  ObjectID = 10 // BTRFS_FREE_SPACE_TREE_OBJECTID
	BlockGroupTreeObjectID ObjectID = 11 // BTRFS_BLOCK_GROUP_TREE_OBJECTID
	RaidStripeTreeObjectID ObjectID = 12 // BTRFS_RAID_STRIPE_TREE_OBJECTID
	RemapTreeObjectID      ObjectID = 13 // BTRFS_REMAP_TREE_OBJECTID
	DevItemsObjectID       ObjectID = 1  // BTRFS_DEV_ITEMS_OBJECTID (chunk tree)
	FirstFreeObjectID      ObjectID = 256
	FirstChunkTreeObjectID ObjectID = 256
	LastFreeObjectID       ObjectID = 1<<64 - 256
	BalanceObjectID        ObjectID = 1<<64 - 4
	OrphanObjectID         ObjectID = 1<<64 - 5
	TreeLogObjectID        ObjectID = 1<<64 - 6
	TreeLogFixupObjectID   ObjectID = 1<<64 - 7
	TreeRelocObjectID      ObjectID = 1<<64 - 8
	DataRelocTreeObjectID  ObjectID = 1<<64 - 9
	ExtentCsumObjectID     ObjectID = 1<<64 - 10
	FreeSpaceObjectID      ObjectID = 1<<64 - 11
	FreeInoObjectID        ObjectID = 1<<64 - 12
	MultipleObjectIDs      ObjectID = 1<<64 - 255
	FirstFreeInode         ObjectID = 256 // root directory inode of every subvolume
)

var treeNames = map[ObjectID]string{
	RootTreeObjectID: "ROOT_TREE", ExtentTreeObjectID: "EXTENT_TREE",
	ChunkTreeObjectID: "CHUNK_TREE", DevTreeObjectID: "DEV_TREE", FSTreeObjectID: "FS_TREE",
	RootTreeDirObjectID: "ROOT_TREE_DIR", CsumTreeObjectID: "CSUM_TREE",
	QuotaTreeObjectID: "QUOTA_TREE", UUIDTreeObjectID: "UUID_TREE",
	FreeSpaceTreeObjectID: "FREE_SPACE_TREE", BlockGroupTreeObjectID: "BLOCK_GROUP_TREE",
	RaidStripeTreeObjectID: "RAID_STRIPE_TREE", RemapTreeObjectID: "REMAP_TREE",
	BalanceObjectID: "BALANCE", OrphanObjectID: "ORPHAN", TreeLogObjectID: "TREE_LOG",
	TreeLogFixupObjectID: "TREE_LOG_FIXUP", TreeRelocObjectID: "TREE_RELOC",
	DataRelocTreeObjectID: "DATA_RELOC_TREE", ExtentCsumObjectID: "EXTENT_CSUM",
	FreeSpaceObjectID: "FREE_SPACE", FreeInoObjectID: "FREE_INO",
	MultipleObjectIDs: "MULTIPLE_OBJECTIDS",
}

// TreeName names a tree id the way btrfs-progs does (FS_TREE, CSUM_TREE, ...);
// subvolume ids and other numbers print in decimal.
func (id ObjectID) TreeName() string {
	if s, ok := treeNames[id]; ok {
		return s
	}
	return fmt.Sprintf("%d", uint64(id))
}
