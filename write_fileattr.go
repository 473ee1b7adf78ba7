package btrfs

import (
	"io/fs"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/compress"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// The btrfs inode flags, as Stat.Flags reports them and SetInodeFlags and
// SetFileAttr take them; chattr(1)'s letter follows each.
const (
	InodeNoDataSum  = uint64(disk.InodeNoDataSum)  // no data checksums (comes with NoDataCow)
	InodeNoDataCow  = uint64(disk.InodeNoDataCow)  // C
	InodeNoCompress = uint64(disk.InodeNoCompress) // m
	InodeSync       = uint64(disk.InodeSync)       // S
	InodeImmutable  = uint64(disk.InodeImmutable)  // i
	InodeAppend     = uint64(disk.InodeAppend)     // a
	InodeNoDump     = uint64(disk.InodeNoDump)     // d
	InodeNoAtime    = uint64(disk.InodeNoAtime)    // A
	InodeDirSync    = uint64(disk.InodeDirSync)    // D
	InodeCompress   = uint64(disk.InodeCompress)   // c
)

// fileAttrFlags are the flags FS_IOC_SETFLAGS reaches on btrfs.
const fileAttrFlags = InodeNoDataCow | InodeNoCompress | InodeSync | InodeImmutable | InodeAppend |
	InodeNoDump | InodeNoAtime | InodeDirSync | InodeCompress

// SetFileAttr gives name the attribute flags flags (the chattr(1) set:
// InodeNoDataCow, InodeCompress, InodeNoCompress, InodeImmutable,
// InodeAppend, InodeNoDump, InodeNoAtime, InodeSync, InodeDirSync) as the
// kernel's FS_IOC_SETFLAGS does on btrfs, where SetInodeFlags changes
// bits one by one:
//   - any other flag is EOPNOTSUPP; COMPRESS with NOCOMPRESS, COMPRESS
//     with NODATACOW, and NODATACOW together with compression on one side
//     and not the other are EINVAL;
//   - NODATACOW changes on a regular file only while it is empty (and
//     brings or takes NODATASUM along), silently otherwise;
//   - the compression property follows: COMPRESS stores the writer's
//     algorithm (Options.Compress, like the compress mount option; zlib
//     without one) in btrfs.compression, anything else removes it.
//
// The change time becomes now, even when no flag changes. A symbolic
// link is EOPNOTSUPP (chattr cannot open one for the ioctl either).
func (fsys *FS) SetFileAttr(name string, flags uint64) error {
	if flags&^fileAttrFlags != 0 {
		return &fs.PathError{Op: "setflags", Path: name, Err: syscall.EOPNOTSUPP}
	}
	algo := "zlib"
	if fsys.w != nil {
		if t, ok := parsePropCompression(fsys.w.opts.Compress); ok && t != compress.None {
			algo = t.String()
		}
	}
	return fsys.changeOnInode("setflags", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err != nil {
			return false, err
		}
		if in.item.IsSymlink() {
			return false, syscall.EOPNOTSUPP
		}
		old := uint64(in.item.Flags) & fileAttrFlags
		comp := InodeCompress | InodeNoCompress
		switch {
		case flags&comp == comp, flags&InodeCompress != 0 && flags&InodeNoDataCow != 0,
			old&InodeNoDataCow != 0 && flags&comp != 0, flags&InodeNoDataCow != 0 && old&comp != 0:
			return false, syscall.EINVAL
		}
		set, clear := disk.InodeFlags(flags&^old), disk.InodeFlags(old&^flags)
		if in.item.IsRegular() && in.item.Size != 0 {
			// The kernel keeps NODATACOW as it is on a file with data.
			set &^= disk.InodeNoDataCow
			clear &^= disk.InodeNoDataCow
		}
		f, err := c.newFlags(in, set, clear)
		if err != nil {
			return false, err
		}
		in.item.Flags = f
		value := ""
		if flags&InodeCompress != 0 {
			value = algo
		}
		if err := c.setCompressionXattr(in, value); err != nil {
			return true, err
		}
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}
