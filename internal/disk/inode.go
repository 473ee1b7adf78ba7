package disk

import "fmt"

// InodeItemSize is the size of struct btrfs_inode_item.
const InodeItemSize = 160

// InodeFlags is the flags word of an inode: the low 32 bits are ordinary
// inode flags, the high 32 bits "read-only compatible" flags that an older
// kernel may only mount read-only.
type InodeFlags uint64

// Inode flags (BTRFS_INODE_*).
const (
	InodeNoDataSum    InodeFlags = 1 << 0  // no data checksums
	InodeNoDataCow    InodeFlags = 1 << 1  // overwrite data in place
	InodeReadonly     InodeFlags = 1 << 2  // legacy, unused by current kernels
	InodeNoCompress   InodeFlags = 1 << 3  // never compress (set when compression did not pay)
	InodePrealloc     InodeFlags = 1 << 4  // has had fallocate'd extents
	InodeSync         InodeFlags = 1 << 5  // chattr +S
	InodeImmutable    InodeFlags = 1 << 6  // chattr +i
	InodeAppend       InodeFlags = 1 << 7  // chattr +a
	InodeNoDump       InodeFlags = 1 << 8  // chattr +d
	InodeNoAtime      InodeFlags = 1 << 9  // chattr +A
	InodeDirSync      InodeFlags = 1 << 10 // chattr +D
	InodeCompress     InodeFlags = 1 << 11 // chattr +c
	InodeRootItemInit InodeFlags = 1 << 31 // set in the inode embedded in ROOT_ITEMs

	// InodeROVerity is the first read-only compatible flag (bit 32): the
	// file has fs-verity data (VERITY_DESC/MERKLE items).
	InodeROVerity InodeFlags = 1 << 32

	// InodeFlagMask holds every ordinary flag the tree-checker accepts.
	InodeFlagMask = InodeNoDataSum | InodeNoDataCow | InodeReadonly | InodeNoCompress |
		InodePrealloc | InodeSync | InodeImmutable | InodeAppend | InodeNoDump |
		InodeNoAtime | InodeDirSync | InodeCompress | InodeRootItemInit
	// InodeROFlagMask holds every known read-only compatible flag.
	InodeROFlagMask = InodeROVerity
)

var inodeFlagNames = []flagName{
	{uint64(InodeNoDataSum), "NODATASUM"}, {uint64(InodeNoDataCow), "NODATACOW"},
	{uint64(InodeReadonly), "READONLY"}, {uint64(InodeNoCompress), "NOCOMPRESS"},
	{uint64(InodePrealloc), "PREALLOC"}, {uint64(InodeSync), "SYNC"},
	{uint64(InodeImmutable), "IMMUTABLE"}, {uint64(InodeAppend), "APPEND"},
	{uint64(InodeNoDump), "NODUMP"}, {uint64(InodeNoAtime), "NOATIME"},
	{uint64(InodeDirSync), "DIRSYNC"}, {uint64(InodeCompress), "COMPRESS"},
	{uint64(InodeRootItemInit), "ROOT_ITEM_INIT"}, {uint64(InodeROVerity), "VERITY"},
}

// String prints the flags as dump-tree does: "none" or "NODATASUM|PREALLOC".
func (f InodeFlags) String() string { return flagsString(uint64(f), inodeFlagNames) }

// POSIX mode bits as stored in InodeItem.Mode (Linux values).
const (
	ModeTypeMask uint32 = 0o170000 // S_IFMT
	ModeSocket   uint32 = 0o140000 // S_IFSOCK
	ModeSymlink  uint32 = 0o120000 // S_IFLNK
	ModeRegular  uint32 = 0o100000 // S_IFREG
	ModeBlockDev uint32 = 0o060000 // S_IFBLK
	ModeDir      uint32 = 0o040000 // S_IFDIR
	ModeCharDev  uint32 = 0o020000 // S_IFCHR
	ModeFIFO     uint32 = 0o010000 // S_IFIFO
	ModeSetUID   uint32 = 0o4000
	ModeSetGID   uint32 = 0o2000
	ModeSticky   uint32 = 0o1000
	ModePerm     uint32 = 0o777
)

// ValidMode reports whether mode has exactly one of the seven file types and
// no bits beyond type, set-id, sticky and permission bits (tree-checker rule).
func ValidMode(mode uint32) bool {
	if mode&^(ModeTypeMask|ModeSetUID|ModeSetGID|ModeSticky|ModePerm) != 0 {
		return false
	}
	return FileTypeOfMode(mode) != FtUnknown
}

// FileTypeOfMode maps the S_IFMT bits of mode to a directory-entry type;
// FtUnknown if they name no type.
func FileTypeOfMode(mode uint32) FileType {
	switch mode & ModeTypeMask {
	case ModeRegular:
		return FtRegular
	case ModeDir:
		return FtDir
	case ModeCharDev:
		return FtCharDev
	case ModeBlockDev:
		return FtBlockDev
	case ModeFIFO:
		return FtFIFO
	case ModeSocket:
		return FtSocket
	case ModeSymlink:
		return FtSymlink
	}
	return FtUnknown
}

// MakeRdev encodes a device number the way btrfs stores it in
// InodeItem.Rdev: the kernel-internal dev_t, (major << 20) | minor.
func MakeRdev(major, minor uint32) uint64 { return uint64(major)<<20 | uint64(minor&0xfffff) }

// RdevMajor returns the major number of a stored rdev.
func RdevMajor(rdev uint64) uint32 { return uint32(rdev >> 20) }

// RdevMinor returns the minor number of a stored rdev.
func RdevMinor(rdev uint64) uint32 { return uint32(rdev & 0xfffff) }

// InodeItem is struct btrfs_inode_item (160 bytes): the attributes of one
// inode, key (ino, INODE_ITEM, 0); also embedded at the start of ROOT_ITEMs.
type InodeItem struct {
	Generation Generation // 0x00 transid that created the inode
	TransID    Generation // 0x08 transid of the last change
	Size       uint64     // 0x10 i_size
	NBytes     uint64     // 0x18 bytes of extents charged to the inode
	BlockGroup uint64     // 0x20 unused hint, 0
	NLink      uint32     // 0x28
	UID        uint32     // 0x2c
	GID        uint32     // 0x30
	Mode       uint32     // 0x34 POSIX mode including the type bits
	Rdev       uint64     // 0x38 (major << 20) | minor, see MakeRdev
	Flags      InodeFlags // 0x40
	Sequence   uint64     // 0x48 NFS change counter
	Reserved   [4]uint64  // 0x50
	ATime      Timespec   // 0x70
	CTime      Timespec   // 0x7c
	MTime      Timespec   // 0x88
	OTime      Timespec   // 0x94 creation time
}

// Decode reads an InodeItem from the first InodeItemSize bytes of b.
func (it *InodeItem) Decode(b []byte) error {
	if len(b) < InodeItemSize {
		return shortErr("inode item", len(b), InodeItemSize)
	}
	it.Generation = Generation(le.Uint64(b))
	it.TransID = Generation(le.Uint64(b[0x08:]))
	it.Size = le.Uint64(b[0x10:])
	it.NBytes = le.Uint64(b[0x18:])
	it.BlockGroup = le.Uint64(b[0x20:])
	it.NLink = le.Uint32(b[0x28:])
	it.UID = le.Uint32(b[0x2c:])
	it.GID = le.Uint32(b[0x30:])
	it.Mode = le.Uint32(b[0x34:])
	it.Rdev = le.Uint64(b[0x38:])
	it.Flags = InodeFlags(le.Uint64(b[0x40:]))
	it.Sequence = le.Uint64(b[0x48:])
	for i := range it.Reserved {
		it.Reserved[i] = le.Uint64(b[0x50+8*i:])
	}
	_ = it.ATime.Decode(b[0x70:])
	_ = it.CTime.Decode(b[0x7c:])
	_ = it.MTime.Decode(b[0x88:])
	_ = it.OTime.Decode(b[0x94:])
	return nil
}

// Encode writes it into b.
func (it *InodeItem) Encode(b []byte) {
	_ = b[InodeItemSize-1]
	le.PutUint64(b, uint64(it.Generation))
	le.PutUint64(b[0x08:], uint64(it.TransID))
	le.PutUint64(b[0x10:], it.Size)
	le.PutUint64(b[0x18:], it.NBytes)
	le.PutUint64(b[0x20:], it.BlockGroup)
	le.PutUint32(b[0x28:], it.NLink)
	le.PutUint32(b[0x2c:], it.UID)
	le.PutUint32(b[0x30:], it.GID)
	le.PutUint32(b[0x34:], it.Mode)
	le.PutUint64(b[0x38:], it.Rdev)
	le.PutUint64(b[0x40:], uint64(it.Flags))
	le.PutUint64(b[0x48:], it.Sequence)
	for i, v := range it.Reserved {
		le.PutUint64(b[0x50+8*i:], v)
	}
	it.ATime.Encode(b[0x70:])
	it.CTime.Encode(b[0x7c:])
	it.MTime.Encode(b[0x88:])
	it.OTime.Encode(b[0x94:])
}

// FileType returns the directory-entry type matching the inode's mode.
func (it *InodeItem) FileType() FileType { return FileTypeOfMode(it.Mode) }

// IsDir reports whether the inode is a directory.
func (it *InodeItem) IsDir() bool { return it.Mode&ModeTypeMask == ModeDir }

// IsRegular reports whether the inode is a regular file.
func (it *InodeItem) IsRegular() bool { return it.Mode&ModeTypeMask == ModeRegular }

// IsSymlink reports whether the inode is a symbolic link.
func (it *InodeItem) IsSymlink() bool { return it.Mode&ModeTypeMask == ModeSymlink }

// String prints the fields the way dump-tree groups them, on one line.
func (it *InodeItem) String() string {
	return fmt.Sprintf("generation %d transid %d size %d nbytes %d block group %d mode %o links %d uid %d gid %d rdev %d sequence %d flags 0x%x(%s)",
		it.Generation, it.TransID, it.Size, it.NBytes, it.BlockGroup, it.Mode, it.NLink,
		it.UID, it.GID, it.Rdev, it.Sequence, uint64(it.Flags), it.Flags)
}
