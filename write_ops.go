package btrfs

import (
	"io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Mkdir makes directory name with permission bits perm (and the set-id
// and sticky bits of perm), owned by root. The parent must exist: EEXIST,
// ENOENT, ENOTDIR and ENAMETOOLONG come as *fs.PathError and change nothing.
func (fsys *FS) Mkdir(name string, perm fs.FileMode) error {
	return fsys.create("mkdir", name, disk.ModeDir|linuxPerm(perm))
}

// CreateEmpty makes an empty regular file name with permission bits perm,
// owned by root. Errors as for Mkdir.
func (fsys *FS) CreateEmpty(name string, perm fs.FileMode) error {
	return fsys.create("create", name, disk.ModeRegular|linuxPerm(perm))
}

// linuxPerm converts the permission, set-id and sticky bits of an
// fs.FileMode to Linux mode bits.
func linuxPerm(m fs.FileMode) uint32 {
	mode := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= disk.ModeSetUID
	}
	if m&fs.ModeSetgid != 0 {
		mode |= disk.ModeSetGID
	}
	if m&fs.ModeSticky != 0 {
		mode |= disk.ModeSticky
	}
	return mode
}

// create adds a new inode of mode (a directory or an empty file) under
// the name's parent: INODE_ITEM, INODE_REF, DIR_ITEM, DIR_INDEX, and the
// parent's size, times and transid.
func (fsys *FS) create(op, name string, mode uint32) error {
	return fsys.change(op, name, func(c *wctx) (bool, error) {
		parent, base, err := c.splitParent(name)
		if err != nil {
			return false, err
		}
		if strings.IndexByte(base, 0) >= 0 {
			return false, syscall.EINVAL
		}
		de, err := c.dirEntry(parent.ino, base)
		if err != nil {
			return false, err
		}
		if de != nil {
			return false, syscall.EEXIST
		}
		ino, err := c.newIno()
		if err != nil {
			return false, err
		}
		index, err := c.nextIndex(parent.ino)
		if err != nil {
			return false, err
		}
		return true, c.link(parent, base, ino, index, mode)
	})
}

// link writes the items of a new inode ino called base in parent.
func (c *wctx) link(parent *winode, base string, ino disk.ObjectID, index uint64, mode uint32) error {
	now := disk.TimespecOf(time.Now())
	item := disk.InodeItem{Generation: c.gen, TransID: c.gen, NLink: 1, Mode: mode,
		ATime: now, CTime: now, MTime: now, OTime: now}
	ibuf := make([]byte, disk.InodeItemSize)
	item.Encode(ibuf)
	if err := c.tr.InsertItem(c.tx, disk.Key{ObjectID: ino, Type: disk.InodeItemKey}, ibuf); err != nil {
		return err
	}
	refs := []disk.InodeRef{{Index: index, Name: []byte(base)}}
	rbuf := make([]byte, disk.InodeRefsSize(refs))
	disk.EncodeInodeRefs(rbuf, refs)
	if err := c.tr.InsertItem(c.tx, disk.Key{ObjectID: ino, Type: disk.InodeRefKey, Offset: uint64(parent.ino)}, rbuf); err != nil {
		return err
	}
	entry := disk.DirItem{Location: disk.Key{ObjectID: ino, Type: disk.InodeItemKey}, TransID: c.gen,
		Type: disk.FileTypeOfMode(mode), Name: []byte(base)}
	dk := disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash(entry.Name)}
	if err := c.addHashed(dk, entry); err != nil {
		return err
	}
	xbuf := make([]byte, entry.Size())
	disk.EncodeDirItems(xbuf, []disk.DirItem{entry})
	if err := c.tr.InsertItem(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: index}, xbuf); err != nil {
		return err
	}
	parent.item.Size += 2 * uint64(len(base))
	c.touch(parent, now.Time(), true)
	return c.putInode(parent)
}

// Chmod sets the permission, set-id and sticky bits of name (symlinks are
// not followed); the file type stays.
func (fsys *FS) Chmod(name string, mode fs.FileMode) error {
	return fsys.change("chmod", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err != nil {
			return false, err
		}
		in.item.Mode = in.item.Mode&disk.ModeTypeMask | linuxPerm(mode)
		c.touch(in, time.Now(), false)
		return true, c.putInode(in)
	})
}

// Chtimes sets the access and modification times of name (symlinks are
// not followed); the change time becomes now.
func (fsys *FS) Chtimes(name string, atime, mtime time.Time) error {
	return fsys.change("chtimes", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err != nil {
			return false, err
		}
		in.item.ATime = disk.TimespecOf(atime)
		in.item.MTime = disk.TimespecOf(mtime)
		c.touch(in, time.Now(), false)
		return true, c.putInode(in)
	})
}

// xattrPrefixes are the namespaces taken as opaque bytes. system. is left
// out: its names (POSIX ACLs) have a format the kernel checks.
var xattrPrefixes = []string{"user.", "trusted.", "security."}

// Setxattr sets extended attribute attr of name (symlinks are not
// followed) to value, replacing an existing value. An attribute outside
// the user., trusted. and security. namespaces is EOPNOTSUPP; one
// that would not fit in a leaf is ENOSPC, as on Linux.
func (fsys *FS) Setxattr(name, attr string, value []byte) error {
	return fsys.change("setxattr", name, func(c *wctx) (bool, error) {
		if err := c.checkXattr(attr, value); err != nil {
			return false, err
		}
		in, err := c.resolve(name)
		if err != nil {
			return false, err
		}
		k := disk.Key{ObjectID: in.ino, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(attr))}
		data, found, err := c.tr.Lookup(c.tx, k)
		if err != nil {
			return false, err
		}
		var entries []disk.DirItem
		if found {
			if entries, err = disk.ParseDirItems(data); err != nil {
				return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "xattr item", Err: err}
			}
		}
		entries = setEntry(entries, disk.DirItem{TransID: c.gen, Type: disk.FtXattr,
			Name: []byte(attr), Data: append([]byte(nil), value...)})
		if disk.DirItemsSize(entries) > c.maxItemSize() {
			return false, syscall.ENOSPC
		}
		if err := c.replaceItem(k, entries); err != nil {
			return true, err
		}
		c.touch(in, time.Now(), false)
		return true, c.putInode(in)
	})
}

// checkXattr validates an attribute name and value before any change.
func (c *wctx) checkXattr(attr string, value []byte) error {
	ok := false
	for _, p := range xattrPrefixes {
		if strings.HasPrefix(attr, p) && len(attr) > len(p) {
			ok = true
		}
	}
	switch {
	case !ok:
		return syscall.EOPNOTSUPP
	case len(attr) > disk.NameMax || strings.IndexByte(attr, 0) >= 0:
		return syscall.ERANGE
	case disk.DirItemBaseSize+len(attr)+len(value) > c.maxItemSize():
		return syscall.ENOSPC
	}
	return nil
}

// maxItemSize is the largest item a leaf holds: its data area less one
// item header.
func (c *wctx) maxItemSize() int {
	return disk.MaxItemDataSize(c.tx.Store().Params().NodeSize)
}

// setEntry replaces the entry with e's name in entries, or appends e.
func setEntry(entries []disk.DirItem, e disk.DirItem) []disk.DirItem {
	for i := range entries {
		if string(entries[i].Name) == string(e.Name) {
			entries[i] = e
			return entries
		}
	}
	return append(entries, e)
}
