package btrfs

import (
	"bytes"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Remove removes name: an empty directory, or a file, symlink or special
// file without data extents (removing data is not supported yet:
// EOPNOTSUPP). An inode whose last name goes loses all its items. A
// directory with entries is ENOTEMPTY; the root is EBUSY.
func (fsys *FS) Remove(name string) error {
	return fsys.change("remove", name, func(c *wctx) (bool, error) {
		if name == "." {
			return false, syscall.EBUSY
		}
		parent, base, err := c.splitParent(name)
		if err != nil {
			return false, err
		}
		de, err := c.dirEntry(parent.ino, base)
		if err != nil {
			return false, err
		}
		if de == nil {
			return false, syscall.ENOENT
		}
		if de.Location.Type != disk.InodeItemKey {
			return false, syscall.EXDEV
		}
		in, err := c.inode(de.Location.ObjectID)
		if err != nil {
			return false, err
		}
		if err := c.checkRemovable(in); err != nil {
			return false, err
		}
		rk := disk.Key{ObjectID: in.ino, Type: disk.InodeRefKey, Offset: uint64(parent.ino)}
		refs, index, err := c.refsWithout(rk, []byte(base))
		if err != nil {
			return false, err
		}
		if parent.item.Size < 2*uint64(len(base)) {
			k := disk.Key{ObjectID: parent.ino, Type: disk.InodeItemKey}
			return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "directory size below its names"}
		}
		return true, c.unlink(parent, in, base, rk, refs, index)
	})
}

// checkRemovable refuses what Remove cannot take away yet.
func (c *wctx) checkRemovable(in *winode) error {
	if in.item.IsDir() {
		if in.item.Size != 0 {
			return syscall.ENOTEMPTY
		}
		return nil
	}
	if in.item.NLink > 1 {
		return nil
	}
	hasData := false
	err := c.tr.Range(c.tx, disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey},
		disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey, Offset: ^uint64(0)},
		func(disk.Key, []byte) (bool, error) { hasData = true; return false, nil })
	if err != nil {
		return err
	}
	if hasData || in.item.NBytes != 0 {
		return syscall.EOPNOTSUPP
	}
	return nil
}

// refsWithout reads the INODE_REF item rk and returns its other entries and
// the DIR_INDEX of the entry called name. A name kept only in an
// INODE_EXTREF is not supported yet.
func (c *wctx) refsWithout(rk disk.Key, name []byte) ([]disk.InodeRef, uint64, error) {
	data, ok, err := c.tr.Lookup(c.tx, rk)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, syscall.EOPNOTSUPP
	}
	refs, err := disk.ParseInodeRefs(data)
	if err != nil {
		return nil, 0, &disk.CorruptError{Tree: c.tr.Owner(), Key: &rk, What: "inode ref", Err: err}
	}
	keep := refs[:0]
	var index uint64
	found := false
	for _, r := range refs {
		if !found && bytes.Equal(r.Name, name) {
			index, found = r.Index, true
			continue
		}
		keep = append(keep, r)
	}
	if !found {
		return nil, 0, syscall.EOPNOTSUPP
	}
	return keep, index, nil
}

// unlink removes the name base of in from parent: the DIR_ITEM entry, the
// DIR_INDEX, the INODE_REF entry; then either drops a link or, at the last
// one, every item of the inode.
func (c *wctx) unlink(parent, in *winode, base string, rk disk.Key, refs []disk.InodeRef, index uint64) error {
	dk := disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash([]byte(base))}
	if err := c.removeHashed(dk, []byte(base)); err != nil {
		return err
	}
	if _, err := c.tr.DeleteItem(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: index}); err != nil {
		return err
	}
	now := time.Now()
	if in.item.IsDir() || in.item.NLink <= 1 {
		end := disk.Key{ObjectID: in.ino, Type: 0xff, Offset: ^uint64(0)}
		if _, err := c.tr.DeleteRange(c.tx, disk.Key{ObjectID: in.ino}, end); err != nil {
			return err
		}
	} else {
		if _, err := c.tr.DeleteItem(c.tx, rk); err != nil {
			return err
		}
		if len(refs) > 0 {
			buf := make([]byte, disk.InodeRefsSize(refs))
			disk.EncodeInodeRefs(buf, refs)
			if err := c.tr.InsertItem(c.tx, rk, buf); err != nil {
				return err
			}
		}
		in.item.NLink--
		c.touch(in, now, false)
		if err := c.putInode(in); err != nil {
			return err
		}
	}
	parent.item.Size -= 2 * uint64(len(base))
	c.touch(parent, now, true)
	return c.putInode(parent)
}
