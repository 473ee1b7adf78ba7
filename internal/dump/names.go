package dump

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// This file holds the naming rules of btrfs-progs 6.2's printers: how
// object ids, key types, key offsets and the various flag words are
// written. They were read off the tool's output for every value class, not
// derived from the format (progs has quirks, kept here on purpose).

// csumItemKey is the obsolete BTRFS_CSUM_ITEM_KEY, which progs still names.
const csumItemKey disk.KeyType = 120

// keyTypeNames are the key types progs 6.2 knows by name; every other type
// prints as UNKNOWN.<n> (including types newer than 6.2).
var keyTypeNames = map[disk.KeyType]string{
	disk.InodeItemKey: "INODE_ITEM", disk.InodeRefKey: "INODE_REF", disk.InodeExtrefKey: "INODE_EXTREF",
	disk.XattrItemKey: "XATTR_ITEM", disk.VerityDescItemKey: "VERITY_DESC_ITEM",
	disk.VerityMerkleItemKey: "VERITY_MERKLE_ITEM", disk.OrphanItemKey: "ORPHAN_ITEM",
	disk.DirLogItemKey: "DIR_LOG_ITEM", disk.DirLogIndexKey: "DIR_LOG_INDEX",
	disk.DirItemKey: "DIR_ITEM", disk.DirIndexKey: "DIR_INDEX", disk.ExtentDataKey: "EXTENT_DATA",
	csumItemKey: "CSUM_ITEM", disk.ExtentCsumKey: "EXTENT_CSUM", disk.RootItemKey: "ROOT_ITEM",
	disk.RootBackrefKey: "ROOT_BACKREF", disk.RootRefKey: "ROOT_REF", disk.ExtentItemKey: "EXTENT_ITEM",
	disk.MetadataItemKey: "METADATA_ITEM", disk.TreeBlockRefKey: "TREE_BLOCK_REF",
	disk.ExtentDataRefKey: "EXTENT_DATA_REF", disk.ExtentRefV0Key: "EXTENT_REF_V0",
	disk.SharedBlockRefKey: "SHARED_BLOCK_REF", disk.SharedDataRefKey: "SHARED_DATA_REF",
	disk.BlockGroupItemKey: "BLOCK_GROUP_ITEM", disk.FreeSpaceInfoKey: "FREE_SPACE_INFO",
	disk.FreeSpaceExtentKey: "FREE_SPACE_EXTENT", disk.FreeSpaceBitmapKey: "FREE_SPACE_BITMAP",
	disk.DevExtentKey: "DEV_EXTENT", disk.DevItemKey: "DEV_ITEM", disk.ChunkItemKey: "CHUNK_ITEM",
	disk.QgroupStatusKey: "QGROUP_STATUS", disk.QgroupInfoKey: "QGROUP_INFO",
	disk.QgroupLimitKey: "QGROUP_LIMIT", disk.QgroupRelationKey: "QGROUP_RELATION",
	disk.TemporaryItemKey: "TEMPORARY_ITEM", disk.PersistentItemKey: "PERSISTENT_ITEM",
	disk.DevReplaceKey: "DEV_REPLACE", disk.UUIDKeySubvol: "UUID_KEY_SUBVOL",
	disk.UUIDKeyReceivedSubvol: "UUID_KEY_RECEIVED_SUBVOL", disk.StringItemKey: "STRING_ITEM",
}

// keyTypeString names a key type; type 0 of the free-space-cache objectid
// is "UNTYPED" (the v1 space cache header).
func keyTypeString(id uint64, t disk.KeyType) string {
	if t == 0 && disk.ObjectID(id) == disk.FreeSpaceObjectID {
		return "UNTYPED"
	}
	if s, ok := keyTypeNames[t]; ok {
		return s
	}
	return "UNKNOWN." + strconv.Itoa(int(t))
}

// objectNames are the object ids progs names whatever the key type.
var objectNames = map[disk.ObjectID]string{
	disk.RootTreeObjectID: "ROOT_TREE", disk.ExtentTreeObjectID: "EXTENT_TREE",
	disk.ChunkTreeObjectID: "CHUNK_TREE", disk.DevTreeObjectID: "DEV_TREE",
	disk.FSTreeObjectID: "FS_TREE", disk.RootTreeDirObjectID: "ROOT_TREE_DIR",
	disk.CsumTreeObjectID: "CSUM_TREE", disk.QuotaTreeObjectID: "QUOTA_TREE",
	disk.UUIDTreeObjectID: "UUID_TREE", disk.FreeSpaceTreeObjectID: "FREE_SPACE_TREE",
	disk.BlockGroupTreeObjectID: "BLOCK_GROUP_TREE", disk.BalanceObjectID: "BALANCE",
	disk.OrphanObjectID: "ORPHAN", disk.TreeLogObjectID: "TREE_LOG",
	disk.TreeLogFixupObjectID: "LOG_FIXUP", disk.TreeRelocObjectID: "TREE_RELOC",
	disk.DataRelocTreeObjectID: "DATA_RELOC_TREE", disk.ExtentCsumObjectID: "EXTENT_CSUM",
	disk.FreeSpaceObjectID: "FREE_SPACE", disk.FreeInoObjectID: "FREE_INO",
	disk.MultipleObjectIDs: "MULTIPLE", ^disk.ObjectID(0): "-1",
}

// qgroupString prints a qgroup id as level/subvolume.
func qgroupString(v uint64) string {
	return strconv.FormatUint(v>>48, 10) + "/" + strconv.FormatUint(v&(1<<48-1), 10)
}

// objectIDString prints an object id in the context of key type t (0 when
// there is no key: header owners, backref roots).
func objectIDString(id uint64, t disk.KeyType) string {
	switch t {
	case disk.DevExtentKey:
		return strconv.FormatUint(id, 10)
	case disk.QgroupRelationKey:
		return qgroupString(id)
	case disk.UUIDKeySubvol, disk.UUIDKeyReceivedSubvol:
		return fmt.Sprintf("0x%016x", id)
	case disk.PersistentItemKey:
		if disk.ObjectID(id) == disk.DevStatsObjectID {
			return "DEV_STATS"
		}
		return strconv.FormatUint(id, 10)
	}
	switch {
	case disk.ObjectID(id) == disk.DevItemsObjectID && t == disk.DevItemKey:
		return "DEV_ITEMS"
	case disk.ObjectID(id) == disk.FirstChunkTreeObjectID && t == disk.ChunkItemKey:
		return "FIRST_CHUNK_TREE"
	}
	if s, ok := objectNames[disk.ObjectID(id)]; ok {
		return s
	}
	return strconv.FormatUint(id, 10)
}

// ownerString prints a tree id with no key context (header owner, backref root).
func ownerString(id uint64) string { return objectIDString(id, 0) }

// keyOffsetString prints a key offset: qgroup ids as level/id, uuid halves
// in hex, the offset of a reloc tree's ROOT_ITEM (a tree id) by name, other
// ROOT_ITEM offsets in decimal, and everything else in decimal except -1.
func keyOffsetString(k disk.Key) string {
	switch k.Type {
	case disk.QgroupRelationKey, disk.QgroupInfoKey, disk.QgroupLimitKey:
		return qgroupString(k.Offset)
	case disk.UUIDKeySubvol, disk.UUIDKeyReceivedSubvol:
		return fmt.Sprintf("0x%016x", k.Offset)
	case disk.RootItemKey:
		if k.ObjectID == disk.TreeRelocObjectID {
			return objectIDString(k.Offset, k.Type)
		}
		return strconv.FormatUint(k.Offset, 10)
	}
	if k.Offset == ^uint64(0) {
		return "-1"
	}
	return strconv.FormatUint(k.Offset, 10)
}

// keyString prints a key as progs' btrfs_print_key does: "key (A B C)".
func keyString(k disk.Key) string {
	id := uint64(k.ObjectID)
	return "key (" + objectIDString(id, k.Type) + " " + keyTypeString(id, k.Type) + " " + keyOffsetString(k) + ")"
}

// inodeFlagNames are the inode flags progs names, in its order; other bits
// are not shown.
var inodeFlagNames = []string{
	"NODATASUM", "NODATACOW", "READONLY", "NOCOMPRESS", "PREALLOC", "SYNC",
	"IMMUTABLE", "APPEND", "NODUMP", "NOATIME", "DIRSYNC", "COMPRESS",
}

func inodeFlagsString(f uint64) string {
	var names []string
	for i, n := range inodeFlagNames {
		if f&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// headerFlagsString names the WRITTEN and RELOC bits of a block header.
func headerFlagsString(f uint64) string {
	var names []string
	if f&disk.HeaderFlagWritten != 0 {
		names = append(names, "WRITTEN")
	}
	if f&disk.HeaderFlagReloc != 0 {
		names = append(names, "RELOC")
	}
	return strings.Join(names, "|")
}

// extentFlagsString mirrors progs: DATA, then TREE_BLOCK (with a "|" only
// after DATA), then "|FULL_BACKREF" always with its bar; no flags print as
// an empty string.
func extentFlagsString(f uint64) string {
	var s string
	if f&uint64(disk.ExtentFlagData) != 0 {
		s = "DATA"
	}
	if f&uint64(disk.ExtentFlagTreeBlock) != 0 {
		if s != "" {
			s += "|"
		}
		s += "TREE_BLOCK"
	}
	if f&uint64(disk.ExtentFlagFullBackref) != 0 {
		s += "|FULL_BACKREF"
	}
	return s
}

// profileName is the profile part of block group flags, picked in progs'
// order of precedence when several profile bits are set.
func profileName(f uint64) string {
	switch {
	case f&disk.BlockGroupRAID10 != 0:
		return "RAID10"
	case f&disk.BlockGroupRAID1 != 0:
		return "RAID1"
	case f&disk.BlockGroupRAID1C3 != 0:
		return "RAID1C3"
	case f&disk.BlockGroupRAID1C4 != 0:
		return "RAID1C4"
	case f&disk.BlockGroupDUP != 0:
		return "DUP"
	case f&disk.BlockGroupRAID0 != 0:
		return "RAID0"
	case f&disk.BlockGroupRAID5 != 0:
		return "RAID5"
	case f&disk.BlockGroupRAID6 != 0:
		return "RAID6"
	}
	return "single"
}

// blockGroupFlagsString prints chunk and block group type words. progs puts
// a "|" before METADATA and SYSTEM only when DATA was printed (so
// METADATA|SYSTEM prints as "METADATASYSTEM"), and always before the
// profile.
func blockGroupFlagsString(f uint64) string {
	var s string
	data := f&disk.BlockGroupData != 0
	if data {
		s = "DATA"
	}
	if f&disk.BlockGroupMetadata != 0 {
		if data {
			s += "|"
		}
		s += "METADATA"
	}
	if f&disk.BlockGroupSystem != 0 {
		if data {
			s += "|"
		}
		s += "SYSTEM"
	}
	return s + "|" + profileName(f)
}

// qgroupStatusFlagsString prints ON or OFF, then SCANNING and INCONSISTENT.
func qgroupStatusFlagsString(f uint64) string {
	s := "OFF"
	if f&disk.QgroupStatusOn != 0 {
		s = "ON"
	}
	if f&disk.QgroupStatusRescan != 0 {
		s += "|SCANNING"
	}
	if f&disk.QgroupStatusInconsistent != 0 {
		s += "|INCONSISTENT"
	}
	return s
}

// dirTypeString names a directory entry type; others print as DIR_ITEM.<n>.
func dirTypeString(t uint8) string {
	names := [...]string{1: "FILE", 2: "DIR", 3: "CHRDEV", 4: "BLKDEV", 5: "FIFO", 6: "SOCK", 7: "SYMLINK", 8: "XATTR"}
	if int(t) < len(names) && names[t] != "" {
		return names[t]
	}
	return "DIR_ITEM." + strconv.Itoa(int(t))
}

func fileExtentTypeString(t uint8) string {
	switch t {
	case 0:
		return "inline"
	case 1:
		return "regular"
	case 2:
		return "prealloc"
	}
	return "unknown"
}

func compressString(c uint8) string {
	switch c {
	case 0:
		return "none"
	case 1:
		return "zlib"
	case 2:
		return "lzo"
	case 3:
		return "zstd"
	}
	return "UNKNOWN." + strconv.Itoa(int(c))
}
