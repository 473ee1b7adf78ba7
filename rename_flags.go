package btrfs

import (
	"cmp"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// RenameNoReplace is Rename that fails with EEXIST when newname exists
// (renameat2 with RENAME_NOREPLACE), also when it is the same inode.
// The check and the rename are one change, so no other change can make
// newname in between.
func (fsys *FS) RenameNoReplace(oldname, newname string) error {
	err := fsys.changeRename("rename", oldname, newname, func(c *wctx) (bool, error) {
		extref := fsys.features()&disk.IncompatExtendedIref != 0
		if err := renameNamesErr(oldname, newname); err != nil {
			return false, err
		}
		// Linux looks the source up first, then refuses an existing
		// target before any check of kinds.
		// The source's entry, not entered: a subvolume moves even
		// when it cannot be written.
		if parent, base, err := c.splitParentAnyLen(oldname); err != nil {
			return false, err
		} else if de, err := c.dirEntry(parent.ino, base); err != nil || de == nil {
			return false, cmp.Or(err, error(syscall.ENOENT))
		}
		if parent, base, err := c.splitParentAnyLen(newname); err == nil {
			de, err := c.dirEntry(parent.ino, base)
			if err != nil {
				return false, err
			}
			if de != nil {
				return false, syscall.EEXIST
			}
		}
		r, err := c.planRename(oldname, newname, extref)
		if err != nil || r == nil {
			return false, err
		}
		return true, c.rename(r)
	})
	return linkError("rename", oldname, newname, err)
}

// RenameExchange swaps the inodes that oldname and newname name
// (renameat2 with RENAME_EXCHANGE): both must exist (ENOENT), in one
// subvolume (EXDEV); either may be a directory, but not one holding the
// other (EINVAL). Both names keep their directory entries' places in
// name order; each inode gets a new change time, the parents new mtime
// and ctime. Two names of one inode exchange to nothing, as on Linux.
// Errors come as *os.LinkError.
func (fsys *FS) RenameExchange(oldname, newname string) error {
	err := fsys.changeRename("rename", oldname, newname, func(c *wctx) (bool, error) {
		extref := fsys.features()&disk.IncompatExtendedIref != 0
		if err := renameNamesErr(oldname, newname); err != nil {
			return false, err
		}
		x, err := c.planExchange(oldname, newname, extref)
		if err != nil || x == nil {
			return false, err
		}
		return true, c.exchange(x)
	})
	return linkError("rename", oldname, newname, err)
}

// exchangeOp is an exchange checked and ready to run: side 0 is oldname,
// side 1 newname.
type exchangeOp struct {
	parent [2]*winode // the same *winode when they are one directory
	base   [2]string
	in     [2]*winode
	ref    [2]backref // each inode's back-reference of its current name
	newRef [2]disk.Key
	index  [2]uint64 // the DIR_INDEX each inode gets under its new name
	// link[i] is set when side i is a subvolume (in[i] is then nil):
	// write_subvol_move.go.
	link [2]*subvolLink
}

// planExchange does every check of an exchange and returns the plan, or
// nil when there is nothing to do. It changes nothing.
func (c *wctx) planExchange(oldname, newname string, extref bool) (*exchangeOp, error) {
	x := &exchangeOp{}
	names := [2]string{oldname, newname}
	for i, name := range names {
		p, base, err := c.splitParent(name)
		if err != nil {
			return nil, err
		}
		de, err := c.dirEntry(p.ino, base)
		if err != nil {
			return nil, err
		}
		if de == nil {
			return nil, syscall.ENOENT
		}
		x.parent[i], x.base[i] = p, base
		switch de.Location.Type {
		case disk.InodeItemKey:
			if x.in[i], err = c.inode(de.Location.ObjectID); err != nil {
				return nil, err
			}
		case disk.RootItemKey:
			// A subvolume's link; a placeholder is EXDEV.
			if x.link[i], err = c.linkOf(p, base, de); err != nil {
				return nil, err
			}
			if x.link[i] == nil {
				return nil, syscall.EXDEV
			}
		default:
			return nil, syscall.EXDEV
		}
	}
	// Linux exchanges within one subvolume, and two subvolume links
	// between subvolumes.
	if x.parent[1].tr != x.parent[0].tr && (x.link[0] == nil || x.link[1] == nil) {
		return nil, syscall.EXDEV
	}
	if x.parent[1].tr == x.parent[0].tr && x.parent[1].ino == x.parent[0].ino {
		x.parent[1] = x.parent[0]
	}
	if x.in[0] != nil && x.in[1] != nil && x.in[0].ino == x.in[1].ino {
		return nil, nil
	}
	if x.link[0] != nil && x.link[1] != nil && x.link[0].id == x.link[1].id {
		return nil, nil
	}
	if x.link[0] != nil || x.link[1] != nil {
		return x, c.planExchangeLinks(x, extref)
	}
	// Neither may hold the other (checked on the directories: the paths
	// may pass through symlinks).
	for i := range 2 {
		if x.in[i].item.IsDir() {
			if under, err := c.dirUnder(x.parent[1-i].ino, x.in[i].ino); err != nil || under {
				return nil, cmp.Or[error](err, syscall.EINVAL)
			}
		}
	}
	for i := range 2 {
		if err := notPinned(x.in[i]); err != nil {
			return nil, err
		}
		if err := notPinned(x.parent[i]); err != nil {
			return nil, err
		}
		var err error
		if x.ref[i], err = c.findBackref(x.in[i].ino, x.parent[i].ino, []byte(x.base[i])); err != nil {
			return nil, err
		}
		if err := c.checkDirSize(x.parent[i], x.base[i]); err != nil {
			return nil, err
		}
	}
	for i := range 2 {
		o := 1 - i
		// Inode i moves to side o. Its old name leaves its INODE_REF
		// for parent i first, which is the same item when the
		// parents are one directory.
		freed := 0
		if x.parent[o] == x.parent[i] && !x.ref[i].extref() {
			freed = disk.InodeRefBaseSize + len(x.base[i])
		}
		var err error
		if x.newRef[i], err = c.planBackref(x.in[i].ino, x.parent[o].ino, []byte(x.base[o]), extref, freed); err != nil {
			return nil, err
		}
		if x.index[i], err = c.nextIndex(x.parent[o].ino); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// exchange runs a planned exchange: both names go, then each comes back
// naming the other inode.
func (c *wctx) exchange(x *exchangeOp) error {
	if x.link[0] != nil || x.link[1] != nil {
		return c.exchangeLinks(x)
	}
	now := c.now()
	for i := range 2 {
		if err := c.dropName(x.parent[i], x.base[i], x.ref[i]); err != nil {
			return err
		}
	}
	for i := range 2 {
		o := 1 - i
		if err := c.addName(x.parent[o], x.base[o], x.in[i], x.index[i], x.newRef[i]); err != nil {
			return err
		}
	}
	for i := range 2 {
		c.touch(x.in[i], now, false)
		if err := c.putInode(x.in[i]); err != nil {
			return err
		}
	}
	c.touch(x.parent[0], now, true)
	if err := c.putInode(x.parent[0]); err != nil {
		return err
	}
	if x.parent[1] == x.parent[0] {
		return nil
	}
	c.touch(x.parent[1], now, true)
	return c.putInode(x.parent[1])
}
