package disk

import (
	"fmt"
	"strings"
)

// Super flags that only btrfs-progs sets while it converts a filesystem
// offline; the kernel refuses to mount with any of them set.
const (
	SuperFlagChangingBGTree    uint64 = 1 << 38 // BTRFS_SUPER_FLAG_CHANGING_BG_TREE
	SuperFlagChangingDataCsum  uint64 = 1 << 39 // BTRFS_SUPER_FLAG_CHANGING_DATA_CSUM
	SuperFlagChangingMetaCsum  uint64 = 1 << 40 // BTRFS_SUPER_FLAG_CHANGING_META_CSUM
	superFlagHeaderRelocShared uint64 = 1 << 1  // the RELOC bit, shared with tree-block headers
)

// flagName pairs one bit with the name btrfs-progs prints for it.
type flagName struct {
	bit  uint64
	name string
}

// flagNames returns the names of the bits of f found in table, in table
// order, and the bits no entry names.
func flagNames(f uint64, table []flagName) ([]string, uint64) {
	var names []string
	for _, e := range table {
		if f&e.bit != 0 {
			names = append(names, e.name)
			f &^= e.bit
		}
	}
	return names, f
}

// flagsString joins the names of f with "|" the way dump-tree prints flag
// words: "none" for zero, unknown bits as UNKNOWN.0x<hex> at the end.
func flagsString(f uint64, table []flagName) string {
	if f == 0 {
		return "none"
	}
	names, rest := flagNames(f, table)
	if rest != 0 {
		names = append(names, fmt.Sprintf("UNKNOWN.0x%x", rest))
	}
	return strings.Join(names, "|")
}

var incompatNames = []flagName{
	{IncompatMixedBackref, "MIXED_BACKREF"}, {IncompatDefaultSubvol, "DEFAULT_SUBVOL"},
	{IncompatMixedGroups, "MIXED_GROUPS"}, {IncompatCompressLZO, "COMPRESS_LZO"},
	{IncompatCompressZstd, "COMPRESS_ZSTD"}, {IncompatBigMetadata, "BIG_METADATA"},
	{IncompatExtendedIref, "EXTENDED_IREF"}, {IncompatRAID56, "RAID56"},
	{IncompatSkinnyMetadata, "SKINNY_METADATA"}, {IncompatNoHoles, "NO_HOLES"},
	{IncompatMetadataUUID, "METADATA_UUID"}, {IncompatRAID1C34, "RAID1C34"},
	{IncompatZoned, "ZONED"}, {IncompatExtentTreeV2, "EXTENT_TREE_V2"},
	{IncompatRaidStripeTree, "RAID_STRIPE_TREE"}, {IncompatSimpleQuota, "SIMPLE_QUOTA"},
	{IncompatRemapTree, "REMAP_TREE"},
}

var compatRONames = []flagName{
	{CompatROFreeSpaceTree, "FREE_SPACE_TREE"}, {CompatROFreeSpaceTreeValid, "FREE_SPACE_TREE_VALID"},
	{CompatROVerity, "VERITY"}, {CompatROBlockGroupTree, "BLOCK_GROUP_TREE"},
}

var superFlagNames = []flagName{
	{SuperFlagWritten, "WRITTEN"}, {superFlagHeaderRelocShared, "RELOC"}, {SuperFlagError, "ERROR"},
	{SuperFlagSeeding, "SEEDING"}, {SuperFlagMetadump, "METADUMP"}, {SuperFlagMetadumpV2, "METADUMP_V2"},
	{SuperFlagChangingFSID, "CHANGING_FSID"}, {SuperFlagChangingFSIDV2, "CHANGING_FSID_V2"},
	{SuperFlagChangingBGTree, "CHANGING_BG_TREE"}, {SuperFlagChangingDataCsum, "CHANGING_DATA_CSUM"},
	{SuperFlagChangingMetaCsum, "CHANGING_META_CSUM"},
}

var headerFlagNames = []flagName{{HeaderFlagWritten, "WRITTEN"}, {HeaderFlagReloc, "RELOC"}}

// IncompatFlagNames names the incompat feature bits of f in bit order, as
// dump-super lists them, and returns the bits it does not know.
func IncompatFlagNames(f uint64) (names []string, unknown uint64) {
	return flagNames(f, incompatNames)
}

// CompatROFlagNames names the compat_ro feature bits of f in bit order and
// returns the bits it does not know.
func CompatROFlagNames(f uint64) (names []string, unknown uint64) {
	return flagNames(f, compatRONames)
}

// SuperFlagNames names the superblock flag bits of f in bit order and
// returns the bits it does not know.
func SuperFlagNames(f uint64) (names []string, unknown uint64) {
	return flagNames(f, superFlagNames)
}

// HeaderFlagsString prints the flag bits of a tree-block header as dump-tree
// does ("WRITTEN", "WRITTEN|RELOC"); the back-reference revision in the top
// byte is not a flag and is left out.
func HeaderFlagsString(f uint64) string {
	return flagsString(f&^(0xff<<BackrefRevShift), headerFlagNames)
}
