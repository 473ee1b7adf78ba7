package btrfs

import (
	"cmp"
	"io/fs"
	"strings"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Rename renames oldname to newname with the semantics of rename(2),
// symlinks not followed. An existing newname is replaced when the kinds
// agree: a file (not a directory) over a file, a directory over an empty
// directory; otherwise EISDIR, ENOTDIR or ENOTEMPTY. Moving a directory
// into its own subtree is EINVAL, renaming onto an ancestor ENOTEMPTY,
// the root EBUSY. When oldname and newname name the same inode (the same
// path, or two hard links) nothing happens, as on Linux.
//
// A moved directory's ".." is its INODE_REF, keyed by the parent, so it
// is that item that moves; btrfs directories have one link, so no
// parent's link count changes. The inode and a replaced target get a new
// change time, both parents new mtime and ctime. Errors come as
// *os.LinkError, as from os.Rename.
func (fsys *FS) Rename(oldname, newname string) error {
	err := fsys.changeRename("rename", oldname, newname, func(c *wctx) (bool, error) {
		extref := fsys.features()&disk.IncompatExtendedIref != 0
		if err := renameNamesErr(oldname, newname); err != nil {
			return false, err
		}
		r, err := c.planRename(oldname, newname, extref)
		if err != nil || r == nil {
			return false, err
		}
		if h := fsys.w.renamePlanned; h != nil {
			h(oldname, newname)
		}
		return true, c.rename(r)
	})
	return linkError("rename", oldname, newname, err)
}

// renameNamesErr is what every kind of rename refuses before it looks at
// the trees (oldname's validity is change's): an invalid newname, and
// the root on either side.
func renameNamesErr(oldname, newname string) error {
	if !validPath(newname) {
		return fs.ErrInvalid
	}
	if oldname == "." || newname == "." {
		return syscall.EBUSY
	}
	return nil
}

// renameOp is a rename checked and ready to run.
type renameOp struct {
	oldParent, newParent *winode // the same *winode when they are one directory
	oldBase, newBase     string
	src                  *winode
	srcRef               backref
	dst                  *winode // the replaced target, or nil
	dstRef               backref
	newRef               disk.Key // the back-reference item for the new name
	index                uint64   // DIR_INDEX of the new name
	// link is set when the source is a subvolume (src is then nil):
	// write_subvol_move.go.
	link *subvolLink
	// holder is set when the target is a snapshot's placeholder of a
	// nested subvolume (dst is then nil), at DIR_INDEX holderIndex.
	holder      bool
	holderIndex uint64
}

// planRename does every check of a rename in the kernel's order and
// returns the plan, or nil when there is nothing to do. It changes
// nothing.
func (c *wctx) planRename(oldname, newname string, extref bool) (*renameOp, error) {
	r := &renameOp{}
	var err error
	if r.oldParent, r.oldBase, err = c.splitParent(oldname); err != nil {
		return nil, err
	}
	if r.newParent, r.newBase, err = c.splitParentAnyLen(newname); err != nil {
		return nil, err
	}
	if strings.IndexByte(r.newBase, 0) >= 0 {
		return nil, syscall.EINVAL
	}
	if r.newParent.tr != r.oldParent.tr {
		// Only a subvolume moves to another subvolume.
		c.tr = r.oldParent.tr
		de, err := c.dirEntry(r.oldParent.ino, r.oldBase)
		if err != nil {
			return nil, err
		}
		if de == nil || de.Location.Type != disk.RootItemKey {
			return nil, syscall.EXDEV
		}
		return c.planSubvolRename(r, de)
	}
	if r.newParent.ino == r.oldParent.ino {
		r.newParent = r.oldParent
	}
	de, err := c.dirEntry(r.oldParent.ino, r.oldBase)
	if err != nil {
		return nil, err
	}
	if de == nil {
		return nil, syscall.ENOENT
	}
	if len(r.newBase) > disk.NameMax {
		return nil, syscall.ENAMETOOLONG
	}
	if de.Location.Type == disk.RootItemKey {
		return c.planSubvolRename(r, de)
	}
	if de.Location.Type != disk.InodeItemKey {
		return nil, syscall.EXDEV
	}
	// As Linux checks, on the directories themselves (paths may pass
	// through symlinks, so their text proves nothing): a directory
	// cannot go under itself, and a directory that holds the source's
	// directory cannot be replaced.
	if de.Type == disk.FtDir {
		if under, err := c.dirUnder(r.newParent.ino, de.Location.ObjectID); err != nil || under {
			return nil, cmp.Or[error](err, syscall.EINVAL)
		}
	}
	if te, err := c.dirEntry(r.newParent.ino, r.newBase); err != nil {
		return nil, err
	} else if te != nil && te.Type == disk.FtDir && te.Location.Type == disk.InodeItemKey {
		if under, err := c.dirUnder(r.oldParent.ino, te.Location.ObjectID); err != nil || under {
			return nil, cmp.Or[error](err, syscall.ENOTEMPTY)
		}
	}
	if r.src, err = c.inode(de.Location.ObjectID); err != nil {
		return nil, err
	}
	if err := notPinned(r.src); err != nil {
		return nil, err
	}
	if err := notPinned(r.oldParent); err != nil {
		return nil, err
	}
	if err := canAddEntry(r.newParent); err != nil {
		return nil, err
	}
	same, err := c.planTarget(r)
	if err != nil || same {
		return nil, err
	}
	return r, c.planMove(r, extref)
}

// planTarget checks the entry newBase that the rename replaces, if any.
// same reports that it is the renamed inode itself (nothing to do).
func (c *wctx) planTarget(r *renameOp) (same bool, err error) {
	de, err := c.dirEntry(r.newParent.ino, r.newBase)
	if err != nil || de == nil {
		return false, err
	}
	if de.Location.Type == disk.RootItemKey {
		// The kernel never replaces a subvolume by rename; a
		// placeholder it replaces with a directory.
		if r.holderIndex, err = c.planReplaceEntry(r.newParent, r.newBase, de, r.src.item.IsDir()); err != nil {
			return false, err
		}
		r.holder = true
		return false, nil
	}
	if de.Location.Type != disk.InodeItemKey {
		return false, syscall.EXDEV
	}
	if de.Location.ObjectID == r.src.ino {
		return true, nil
	}
	if r.dst, err = c.inode(de.Location.ObjectID); err != nil {
		return false, err
	}
	if err := notPinned(r.dst); err != nil {
		return false, err
	}
	switch srcDir, dstDir := r.src.item.IsDir(), r.dst.item.IsDir(); {
	case srcDir && !dstDir:
		return false, syscall.ENOTDIR
	case !srcDir && dstDir:
		return false, syscall.EISDIR
	}
	if err := c.checkRemovable(r.dst); err != nil {
		return false, err
	}
	if r.dstRef, err = c.findBackref(r.dst.ino, r.newParent.ino, []byte(r.newBase)); err != nil {
		return false, err
	}
	return false, c.checkDirSize(r.newParent, r.newBase)
}

// planMove finds the renamed inode's back-reference and decides where its
// new one goes and which DIR_INDEX the new name gets.
func (c *wctx) planMove(r *renameOp, extref bool) error {
	var err error
	if r.srcRef, err = c.findBackref(r.src.ino, r.oldParent.ino, []byte(r.oldBase)); err != nil {
		return err
	}
	if err := c.checkDirSize(r.oldParent, r.oldBase); err != nil {
		return err
	}
	// Within one directory the old name leaves the INODE_REF item before
	// the new one is added, so its room counts.
	freed := 0
	if r.newParent == r.oldParent && !r.srcRef.extref() {
		freed = disk.InodeRefBaseSize + len(r.oldBase)
	}
	if r.newRef, err = c.planBackref(r.src.ino, r.newParent.ino, []byte(r.newBase), extref, freed); err != nil {
		return err
	}
	r.index, err = c.nextIndex(r.newParent.ino)
	return err
}

// rename runs a planned rename: the target's name goes (and the target
// with it at its last link), the old name goes, the new name comes.
func (c *wctx) rename(r *renameOp) error {
	if r.link != nil {
		return c.renameSubvol(r)
	}
	now := c.now()
	if err := c.dropTarget(r, now); err != nil {
		return err
	}
	if err := c.dropName(r.oldParent, r.oldBase, r.srcRef); err != nil {
		return err
	}
	if err := c.addName(r.newParent, r.newBase, r.src, r.index, r.newRef); err != nil {
		return err
	}
	c.touch(r.src, now, false)
	if err := c.putInode(r.src); err != nil {
		return err
	}
	c.touch(r.oldParent, now, true)
	if err := c.putInode(r.oldParent); err != nil {
		return err
	}
	if r.newParent == r.oldParent {
		return nil
	}
	c.touch(r.newParent, now, true)
	return c.putInode(r.newParent)
}
