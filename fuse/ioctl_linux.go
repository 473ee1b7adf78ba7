//go:build linux

package fuse

import (
	"context"
	"encoding/binary"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
)

var _ fs.NodeIoctler = (*node)(nil)

// The inode-flags ioctls (chattr, lsattr): the kernel's FUSE sends them
// for any file once opened, with the flags as a 32-bit int.
const (
	iocGetFlags = 0x80086601 // FS_IOC_GETFLAGS
	iocSetFlags = 0x40086602 // FS_IOC_SETFLAGS
	// The kernel reads the flags through FS_IOC_FSGETXATTR (struct
	// fsxattr, 28 bytes) before it changes them, and may change the
	// xflags through FS_IOC_FSSETXATTR.
	iocFSGetXattr = 0x801c581f
	iocFSSetXattr = 0x401c5820
	fsxattrSize   = 28
)

// xflagMap pairs the FS_XFLAG_* bits of struct fsxattr with btrfs inode
// flags, as btrfs_fileattr_get fills them.
var xflagMap = []struct{ xflag, btrfs uint64 }{
	{0x00000008, 1 << 6}, // FS_XFLAG_IMMUTABLE
	{0x00000010, 1 << 7}, // FS_XFLAG_APPEND
	{0x00000020, 1 << 5}, // FS_XFLAG_SYNC
	{0x00000040, 1 << 9}, // FS_XFLAG_NOATIME
	{0x00000080, 1 << 8}, // FS_XFLAG_NODUMP
}

// flagMap pairs the FS_*_FL bits chattr speaks with the btrfs inode flags
// they stand for, as the kernel's btrfs_inode_flags_to_fsflags does.
var flagMap = []struct{ fsFlag, btrfs uint64 }{
	{0x00000008, 1 << 5},  // FS_SYNC_FL, SYNC
	{0x00000010, 1 << 6},  // FS_IMMUTABLE_FL, IMMUTABLE
	{0x00000020, 1 << 7},  // FS_APPEND_FL, APPEND
	{0x00000040, 1 << 8},  // FS_NODUMP_FL, NODUMP
	{0x00000080, 1 << 9},  // FS_NOATIME_FL, NOATIME
	{0x00010000, 1 << 10}, // FS_DIRSYNC_FL, DIRSYNC
	{0x00800000, 1 << 1},  // FS_NOCOW_FL, NODATACOW
	{0x00000004, 1 << 11}, // FS_COMPR_FL, COMPRESS
	{0x00000400, 1 << 3},  // FS_NOCOMP_FL, NOCOMPRESS
}

// Ioctl answers FS_IOC_GETFLAGS and FS_IOC_SETFLAGS; other ioctls are
// ENOTTY, as for a file that has none.
func (n *node) Ioctl(ctx context.Context, f fs.FileHandle, cmd uint32, arg uint64, input []byte, output []byte) (int32, syscall.Errno) {
	switch cmd {
	case iocGetFlags:
		st, errno := n.stat()
		if errno != 0 {
			return 0, errno
		}
		if len(output) < 4 {
			return 0, syscall.EINVAL
		}
		var fl uint32
		for _, m := range flagMap {
			if st.Flags&m.btrfs != 0 {
				fl |= uint32(m.fsFlag)
			}
		}
		binary.LittleEndian.PutUint32(output, fl)
		return 0, 0
	case iocFSGetXattr:
		st, errno := n.stat()
		if errno != 0 {
			return 0, errno
		}
		if len(output) < fsxattrSize {
			return 0, syscall.EINVAL
		}
		clear(output[:fsxattrSize])
		var xf uint32
		for _, m := range xflagMap {
			if st.Flags&m.btrfs != 0 {
				xf |= uint32(m.xflag)
			}
		}
		binary.LittleEndian.PutUint32(output, xf)
		return 0, 0
	case iocSetFlags, iocFSSetXattr:
		if n.m.ro {
			return 0, syscall.EROFS
		}
		if len(input) < 4 {
			return 0, syscall.EINVAL
		}
		_ = n.putGathered() // +C needs an empty file, +i takes no more writes
		table := flagMap
		if cmd == iocFSSetXattr {
			table = []struct{ fsFlag, btrfs uint64 }(xflagPairs())
		}
		return 0, n.setFlags(uint64(binary.LittleEndian.Uint32(input)), table)
	}
	return 0, syscall.ENOTTY
}

// xflagPairs is xflagMap in flagMap's shape.
func xflagPairs() []struct{ fsFlag, btrfs uint64 } {
	out := make([]struct{ fsFlag, btrfs uint64 }, len(xflagMap))
	for i, m := range xflagMap {
		out[i].fsFlag, out[i].btrfs = m.xflag, m.btrfs
	}
	return out
}

// setFlags gives n the btrfs flags that want (in table's terms) names
// and takes away those it does not; flags outside table stay.
func (n *node) setFlags(want uint64, table []struct{ fsFlag, btrfs uint64 }) syscall.Errno {
	st, errno := n.stat()
	if errno != 0 {
		return errno
	}
	var set, clr, known uint64
	for _, m := range table {
		known |= m.fsFlag
		switch on := st.Flags&m.btrfs != 0; {
		case want&m.fsFlag != 0 && !on:
			set |= m.btrfs
		case want&m.fsFlag == 0 && on:
			clr |= m.btrfs
		}
	}
	if want&^known != 0 {
		return syscall.EOPNOTSUPP
	}
	if set|clr == 0 {
		return 0
	}
	return toErrno(n.m.fsys.SetInodeFlags(n.path(), set, clr))
}
