package btrfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// linkMax is BTRFS_LINK_MAX, the most names one inode may have: link
// past it is EMLINK.
const linkMax = 65535

// Link makes newname a hard link to the file oldname (symlinks are not
// followed, as linkat without AT_SYMLINK_FOLLOW). The inode gains a name
// in newname's directory, recorded in its INODE_REF item for that
// directory or, once that item is full, in an INODE_EXTREF item (the
// EXTENDED_IREF feature; without it the kernel's EMLINK). Errors come as
// *os.LinkError, as from os.Link: ENOENT, EEXIST, ENOTDIR, ENAMETOOLONG,
// EPERM for a directory, EMLINK at 65535 links, EXDEV across subvolumes.
func (fsys *FS) Link(oldname, newname string) error {
	err := fsys.changeLink("link", oldname, newname, func(c *wctx) (bool, error) {
		if !validPath(newname) {
			return false, fs.ErrInvalid
		}
		extref := fsys.features()&disk.IncompatExtendedIref != 0
		src, err := c.resolve(oldname)
		if err != nil {
			return false, err
		}
		parent, base, err := c.prepareName(newname)
		if err != nil {
			return false, err
		}
		if src.tr != parent.tr {
			return false, syscall.EXDEV
		}
		if err := notPinned(src); err != nil {
			return false, err
		}
		if src.item.IsDir() {
			return false, syscall.EPERM
		}
		if src.item.NLink >= linkMax {
			return false, syscall.EMLINK
		}
		rk, err := c.planBackref(src.ino, parent.ino, []byte(base), extref, 0)
		if err != nil {
			return false, err
		}
		index, err := c.nextIndex(parent.ino)
		if err != nil {
			return false, err
		}
		return true, c.addLink(parent, base, src, index, rk)
	})
	return linkError("link", oldname, newname, err)
}

// addLink gives the existing inode in the new name base in parent, one
// more link, and the change time of both.
func (c *wctx) addLink(parent *winode, base string, in *winode, index uint64, rk disk.Key) error {
	now := c.now()
	if err := c.addName(parent, base, in, index, rk); err != nil {
		return err
	}
	in.item.NLink++
	c.touch(in, now, false)
	if err := c.putInode(in); err != nil {
		return err
	}
	c.touch(parent, now, true)
	return c.putInode(parent)
}

// prepareName does the checks a new entry name starts with: its parent
// resolves to a directory, the name is short enough, has no NUL and is
// free (EEXIST). It changes nothing.
func (c *wctx) prepareName(name string) (*winode, string, error) {
	parent, base, err := c.splitParent(name)
	if err == nil {
		err = canAddEntry(parent)
	}
	if err != nil {
		return nil, "", err
	}
	for i := 0; i < len(base); i++ {
		if base[i] == 0 {
			return nil, "", syscall.EINVAL
		}
	}
	de, err := c.dirEntry(parent.ino, base)
	if err != nil {
		return nil, "", err
	}
	if de != nil {
		return nil, "", syscall.EEXIST
	}
	return parent, base, nil
}

// features returns the superblock's incompat flags, which decide how
// some items are written (EXTENDED_IREF for INODE_EXTREF). Called inside
// a change, with the write lock held, as Commit replaces the superblock.
func (fsys *FS) features() uint64 {
	if fsys.w == nil {
		return 0
	}
	return fsys.w.tfs.Super().IncompatFlags
}

// linkError turns the *fs.PathError of a change named by two paths into
// the *os.LinkError the os package returns for link, rename and symlink.
func linkError(op, oldname, newname string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &os.LinkError{Op: op, Old: oldname, New: newname, Err: pe.Err}
	}
	return err
}
