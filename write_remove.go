package btrfs

import (
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Remove removes name: an empty directory, or a file, symlink or special
// file. An inode whose last name goes loses all its items, and the
// references of its data extents (freed at Commit when no other file
// shares them). A directory with entries is ENOTEMPTY; the root is
// EBUSY.
//
// As the kernel's rmdir, a subvolume (or snapshot) whose root directory
// is empty is deleted (as DeleteSubvolume deletes it; read-only ones
// too; the default subvolume is EPERM), one with entries is ENOTEMPTY,
// and the placeholder a snapshot shows for a subvolume nested in its
// source is removed. The check that the subvolume is empty and its
// deletion are one change, as the kernel's rmdir holds its inode locks
// across both: a change that fills the subvolume runs before (Remove is
// ENOTEMPTY) or after (it finds no subvolume). A subvolume changed in
// the running transaction is committed first, as DeleteSubvolume does.
func (fsys *FS) Remove(name string) error {
	return fsys.retryTreeChanged(func() error { return fsys.remove(name) })
}

func (fsys *FS) remove(name string) error {
	return fsys.changeUnlink("remove", name, func(c *wctx) (bool, error) {
		if name == "." {
			return false, syscall.EBUSY
		}
		parent, base, err := c.splitParent(name)
		if err != nil {
			return false, err
		}
		if de, err := c.dirEntry(parent.ino, base); err != nil {
			return false, err
		} else if de != nil && de.Location.Type == disk.RootItemKey {
			return c.removeSubvolEntry(parent, base, de)
		}
		in, ref, err := c.victim(parent, base)
		if err != nil {
			return false, err
		}
		now := c.now()
		if err := c.unlink(parent, in, base, ref, now); err != nil {
			return true, err
		}
		c.touch(parent, now, true)
		return true, c.putInode(parent)
	})
}

// victim finds the inode called base in parent and checks that the name
// can go: ENOENT, EXDEV for a subvolume, what checkRemovable refuses. It
// returns the inode and where its name is recorded, and changes nothing.
func (c *wctx) victim(parent *winode, base string) (*winode, backref, error) {
	if err := notPinned(parent); err != nil {
		return nil, backref{}, err
	}
	de, err := c.dirEntry(parent.ino, base)
	if err != nil {
		return nil, backref{}, err
	}
	if de == nil {
		return nil, backref{}, syscall.ENOENT
	}
	if de.Location.Type != disk.InodeItemKey {
		return nil, backref{}, syscall.EXDEV
	}
	in, err := c.inode(de.Location.ObjectID)
	if err != nil {
		return nil, backref{}, err
	}
	if err := c.checkRemovable(in); err != nil {
		return nil, backref{}, err
	}
	ref, err := c.findBackref(in.ino, parent.ino, []byte(base))
	if err != nil {
		return nil, backref{}, err
	}
	if err := c.checkDirSize(parent, base); err != nil {
		return nil, backref{}, err
	}
	return in, ref, nil
}

// checkDirSize refuses to take base out of a directory whose size does
// not even count it (the subtraction would wrap).
func (c *wctx) checkDirSize(parent *winode, base string) error {
	if parent.item.Size < 2*uint64(len(base)) {
		k := disk.Key{ObjectID: parent.ino, Type: disk.InodeItemKey}
		return &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "directory size below its names"}
	}
	return nil
}

// checkRemovable refuses to take away a name of in when a flag pins it
// (EPERM) or it is a directory with entries (ENOTEMPTY).
func (c *wctx) checkRemovable(in *winode) error {
	if err := notPinned(in); err != nil {
		return err
	}
	if in.item.IsDir() {
		if in.item.Size != 0 {
			return syscall.ENOTEMPTY
		}
		return nil
	}
	// The last name of a file with data extents can go too: unlink
	// drops the extents' references (dropFileData, write_data_ops.go).
	return nil
}

// unlink removes the name base of in from parent (dropName) and then
// either drops a link of in or, at the last one, every item of in. The
// caller updates and writes the parent's times.
func (c *wctx) unlink(parent, in *winode, base string, ref backref, now time.Time) error {
	if err := c.dropName(parent, base, ref); err != nil {
		return err
	}
	if in.item.IsDir() || in.item.NLink <= 1 {
		if err := c.dropFileData(in); err != nil {
			return err
		}
		end := disk.Key{ObjectID: in.ino, Type: 0xff, Offset: ^uint64(0)}
		_, err := c.tr.DeleteRange(c.tx, disk.Key{ObjectID: in.ino}, end)
		return err
	}
	in.item.NLink--
	c.touch(in, now, false)
	return c.putInode(in)
}

// dropName removes the name base from parent: the DIR_ITEM
// entry, the DIR_INDEX item, the back-reference ref, and the name from
// the parent's size. The inode the name points at is left as it is.
func (c *wctx) dropName(parent *winode, base string, ref backref) error {
	// A path resolved through this name would now be wrong. The
	// remembered directories are steps of one name each, so only this
	// name's step goes: steps below it start from a directory no path
	// reaches any more, and whose number no new inode takes while the
	// FS is open (newIno). Clearing them all made every removal in a
	// directory walk its whole path again (rm -rf).
	c.cache.mu.Lock()
	delete(c.cache.dirs, dirEntKey{dirKey{parent.tr.Owner(), parent.ino}, base})
	c.cache.mu.Unlock()
	name := []byte(base)
	dk := disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash(name)}
	if err := c.removeHashed(dk, name); err != nil {
		return err
	}
	if _, err := c.tr.DeleteItem(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: ref.index}); err != nil {
		return err
	}
	if err := c.dropBackref(ref, parent.ino, name); err != nil {
		return err
	}
	parent.item.Size -= 2 * uint64(len(base))
	return nil
}
