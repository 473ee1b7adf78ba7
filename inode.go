package btrfs

import (
	"io/fs"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// inode is one loaded inode of one subvolume.
type inode struct {
	sv   *subvol
	ino  disk.ObjectID
	item disk.InodeItem
}

// loadInode reads the INODE_ITEM of ino in sv.
func (fsys *FS) loadInode(sv *subvol, ino disk.ObjectID) (*inode, error) {
	in, err := fsys.findInode(sv, ino)
	if err == nil && in == nil {
		k := disk.Key{ObjectID: ino, Type: disk.InodeItemKey}
		return nil, &disk.CorruptError{Tree: sv.id, Key: &k, What: "inode item missing"}
	}
	return in, err
}

// findInode is loadInode for an inode that may be gone (nil, nil): one an
// open file named before a change removed it.
func (fsys *FS) findInode(sv *subvol, ino disk.ObjectID) (*inode, error) {
	it, err := findInodeItem(fsys.itemsOf(sv), ino)
	if err != nil || it == nil {
		return nil, err
	}
	return &inode{sv: sv, ino: ino, item: *it}, nil
}

func (in *inode) isDir() bool     { return in.item.IsDir() }
func (in *inode) isSymlink() bool { return in.item.IsSymlink() }

// Stat is what FileInfo.Sys returns: the inode as btrfs stores it.
type Stat struct {
	// Subvolume is the id of the subvolume tree holding the inode; with
	// Ino it identifies the inode (hardlinks share both).
	Subvolume uint64
	// Ino is the inode number within the subvolume.
	Ino uint64
	// Mode is the Linux st_mode, type bits included.
	Mode uint32
	// Nlink, UID and GID are st_nlink, st_uid and st_gid.
	Nlink    uint32
	UID, GID uint32
	// RdevMajor and RdevMinor are the device number of device nodes.
	RdevMajor, RdevMinor uint32
	// Size is st_size; NBytes the bytes of extents charged to the inode.
	Size, NBytes uint64
	// Atime, Mtime, Ctime and Otime (birth) with nanoseconds, in UTC.
	Atime, Mtime, Ctime, Otime time.Time
	// Flags are the btrfs inode flags (NODATASUM, NODATACOW, ...).
	Flags uint64
	// Generation and TransID are the transactions that created the inode
	// and last changed it.
	Generation, TransID uint64
}

func (in *inode) stat() *Stat { return itemStat(in.sv.id, in.ino, &in.item) }

// itemStat is the Stat of inode ino of subvolume sv whose item is it.
func itemStat(sv, ino disk.ObjectID, it *disk.InodeItem) *Stat {
	return &Stat{
		Subvolume: uint64(sv), Ino: uint64(ino), Mode: it.Mode, Nlink: it.NLink,
		UID: it.UID, GID: it.GID, RdevMajor: disk.RdevMajor(it.Rdev), RdevMinor: disk.RdevMinor(it.Rdev),
		Size: it.Size, NBytes: it.NBytes, Atime: it.ATime.Time(), Mtime: it.MTime.Time(),
		Ctime: it.CTime.Time(), Otime: it.OTime.Time(), Flags: uint64(it.Flags),
		Generation: uint64(it.Generation), TransID: uint64(it.TransID),
	}
}

// fileInfo implements fs.FileInfo.
type fileInfo struct {
	name string
	in   *inode
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return int64(fi.in.item.Size) }
func (fi *fileInfo) Mode() fs.FileMode  { return FileModeOf(fi.in.item.Mode) }
func (fi *fileInfo) ModTime() time.Time { return fi.in.item.MTime.Time() }
func (fi *fileInfo) IsDir() bool        { return fi.in.isDir() }
func (fi *fileInfo) Sys() any           { return fi.in.stat() }
