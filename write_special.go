package btrfs

import (
	"io/fs"
	"strings"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// pathMax is Linux PATH_MAX: a symlink target, with its NUL, fits in it.
const pathMax = 4096

// Symlink makes name a symbolic link to target. The target is kept as the
// link's only file extent, an uncompressed inline EXTENT_DATA at offset
// 0; size and nbytes are its length, the mode 0777. An empty target is
// ENOENT; a target longer than 4095 bytes (PATH_MAX) or than one inline
// extent can hold (a leaf's largest item less the extent header, and at
// most a sector less one byte, what btrfs check accepts) ENAMETOOLONG.
// Errors come as *os.LinkError, as from os.Symlink. The link is owned by
// root, as SymlinkWith with nil options makes it.
func (fsys *FS) Symlink(target, name string) error {
	return fsys.SymlinkWith(target, name, nil)
}

// SymlinkWith is Symlink with the owner of opts (a symlink takes no ACL
// and no umask).
func (fsys *FS) SymlinkWith(target, name string, opts *CreateOptions) error {
	err := fsys.createChange(opts)("symlink", name, func(c *wctx) (bool, error) {
		limit := fsys.maxInline()
		switch {
		case target == "":
			return false, syscall.ENOENT
		case len(target) >= pathMax:
			return false, syscall.ENAMETOOLONG
		case strings.IndexByte(target, 0) >= 0:
			return false, syscall.EINVAL
		}
		at, err := c.prepareNew(name, opts)
		if err != nil {
			return false, err
		}
		if len(target) > min(limit, c.maxItemSize()-disk.FileExtentInlineDataStart) {
			return false, syscall.ENAMETOOLONG
		}
		now := c.now()
		in := &winode{ino: at.ino, item: c.newInodeItem(disk.ModeSymlink|0o777, now)}
		in.item.Size = uint64(len(target))
		in.item.NBytes = uint64(len(target))
		if err := c.linkNew(at, in, now, opts); err != nil {
			return true, err
		}
		fe := disk.FileExtentItem{Generation: c.gen, RAMBytes: uint64(len(target)),
			Compression: disk.CompressNone, Type: disk.FileExtentInline, InlineData: []byte(target)}
		buf := make([]byte, fe.Size())
		fe.Encode(buf)
		return true, c.tr.InsertItem(c.tx, disk.Key{ObjectID: at.ino, Type: disk.ExtentDataKey}, buf)
	})
	return linkError("symlink", target, name, err)
}

// maxInline is the longest uncompressed inline extent btrfs check
// accepts: a sector less one byte.
func (fsys *FS) maxInline() int {
	if fsys.w == nil {
		return 0
	}
	return int(fsys.w.tfs.Super().SectorSize) - 1
}

// Mknod makes the special file name: a named pipe (fs.ModeNamedPipe), a
// socket (fs.ModeSocket), a block device (fs.ModeDevice) or a character
// device (fs.ModeDevice|fs.ModeCharDevice), with the permission, set-id
// and sticky bits of mode, owned by root. dev is the device number in
// the Linux user-space encoding (unix.Mkdev, the st_rdev of stat), used
// for devices only; it is stored as the kernel stores it,
// (major << 20) | minor. Any other file type, or a device number the
// kernel cannot hold (major above 4095, minor above 1048575), is EINVAL.
// Other errors as for Mkdir. The node is owned by root, as MknodWith with
// nil options makes it.
func (fsys *FS) Mknod(name string, mode fs.FileMode, dev uint64) error {
	return fsys.MknodWith(name, mode, dev, nil)
}

// MknodWith is Mknod with the owner, umask and inheritance of opts, as
// for CreateEmptyWith.
func (fsys *FS) MknodWith(name string, mode fs.FileMode, dev uint64, opts *CreateOptions) error {
	return fsys.createChange(opts)("mknod", name, func(c *wctx) (bool, error) {
		lmode, rdev, err := nodeMode(mode, dev)
		if err != nil {
			return false, err
		}
		at, err := c.prepareNew(name, opts)
		if err != nil {
			return false, err
		}
		now := c.now()
		in := &winode{ino: at.ino, item: c.newInodeItem(lmode, now)}
		in.item.Rdev = rdev
		return true, c.linkNew(at, in, now, opts)
	})
}

// nodeMode converts the mode and device number of Mknod to the Linux mode
// and the rdev stored in the inode.
func nodeMode(mode fs.FileMode, dev uint64) (uint32, uint64, error) {
	m := UnixMode(mode)
	switch m & disk.ModeTypeMask {
	case disk.ModeFIFO, disk.ModeSocket:
		return m, 0, nil
	case disk.ModeBlockDev, disk.ModeCharDev:
	default:
		return 0, 0, syscall.EINVAL
	}
	// The user-space dev_t: minor bits 0-7 and 20-31 (and 44-63), major
	// bits 8-19 (and 32-43).
	major := uint32(dev>>8)&0xfff | uint32(dev>>32)&^0xfff
	minor := uint32(dev)&0xff | uint32(dev>>12)&^0xff
	if major > 0xfff || minor > 0xfffff {
		return 0, 0, syscall.EINVAL
	}
	return m, disk.MakeRdev(major, minor), nil
}
