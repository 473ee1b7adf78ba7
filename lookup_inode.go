package btrfs

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// StatInode describes inode ino of subvolume subvol (the Stat.Subvolume
// and Stat.Ino of an earlier Stat), found by number rather than by path:
// one tree search where a path costs two per component. A FUSE getattr
// knows the inode, not a path. An inode that is gone (or never was) is
// fs.ErrNotExist. The FileInfo's name is the inode number.
func (fsys *FS) StatInode(subvol, ino uint64) (fs.FileInfo, error) {
	fsys, done := fsys.reader()
	defer done()
	name := strconv.FormatUint(ino, 10)
	in, err := fsys.inodeByNumber(subvol, ino)
	if err != nil {
		return nil, &fs.PathError{Op: "statinode", Path: name, Err: err}
	}
	return &fileInfo{name: name, in: in}, nil
}

// LookupInode finds name in the directory that is inode dir of subvolume
// subvol and describes what it names, as Lstat of the path would (a
// symlink is not followed; an entry of a nested subvolume gives that
// subvolume's root directory): a FUSE lookup knows the directory's inode,
// not its path. name is one component: "", ".", ".." and names with a
// slash are EINVAL; a missing name is fs.ErrNotExist; a dir that is not a
// directory ENOTDIR.
func (fsys *FS) LookupInode(subvol, dir uint64, name string) (fs.FileInfo, error) {
	fsys, done := fsys.reader()
	defer done()
	perr := func(err error) error { return &fs.PathError{Op: "lookup", Path: name, Err: err} }
	if name == "" || name == "." || name == ".." || strings.IndexByte(name, '/') >= 0 {
		return nil, perr(fs.ErrInvalid)
	}
	d, err := fsys.inodeByNumber(subvol, dir)
	if err != nil {
		return nil, perr(err)
	}
	if !d.isDir() {
		return nil, perr(errNotDir)
	}
	e, ok, err := fsys.lookup(d, name)
	if err != nil {
		return nil, perr(err)
	}
	if !ok {
		return nil, perr(fs.ErrNotExist)
	}
	in, err := fsys.resolveEntry(d, e)
	if err != nil {
		return nil, perr(err)
	}
	return &fileInfo{name: name, in: in}, nil
}

// OpenInode opens inode ino of subvolume subvol, found by number (see
// StatInode), as Open opens a path to it: an open file or directory that
// reads, writes and syncs like one opened by name. A symlink opens as
// itself (there is no path to follow). A FUSE open knows the inode, not a
// path.
func (fsys *FS) OpenInode(subvol, ino uint64) (*File, error) {
	r, done := fsys.reader()
	defer done()
	name := strconv.FormatUint(ino, 10)
	in, err := r.inodeByNumber(subvol, ino)
	if err != nil {
		return nil, &fs.PathError{Op: "openinode", Path: name, Err: err}
	}
	return newFile(fsys, r, name, in), nil
}

// inodeByNumber loads inode ino of subvolume subvol at the current root.
// Read lock held.
func (fsys *FS) inodeByNumber(subvol, ino uint64) (*inode, error) {
	id := disk.ObjectID(subvol)
	if !id.IsFSTree() {
		return nil, fmt.Errorf("tree %d is not a subvolume: %w", subvol, syscall.EINVAL)
	}
	sv, err := fsys.subvolume(id)
	if err != nil {
		return nil, err
	}
	in, err := fsys.findInode(sv, disk.ObjectID(ino))
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fs.ErrNotExist
	}
	return in, nil
}
