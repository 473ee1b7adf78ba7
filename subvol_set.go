package btrfs

import (
	"fmt"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// SetSubvolumeReadOnly marks the subvolume whose root directory is name
// read-only, or writable again (as `btrfs property set PATH ro true`,
// which sets BTRFS_ROOT_SUBVOL_RDONLY in its ROOT_ITEM). The top-level
// subvolume cannot be changed; name must be a subvolume's root directory
// (EINVAL otherwise).
func (fsys *FS) SetSubvolumeReadOnly(name string, ro bool) error {
	return fsys.change("set read-only", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err != nil {
			return false, err
		}
		id := c.tr.Owner()
		if in.ino != disk.FirstFreeObjectID || id == disk.FSTreeObjectID {
			return false, syscall.EINVAL
		}
		return true, c.updateRootItem(id, func(ri *disk.RootItem) {
			if ro {
				ri.Flags |= disk.RootSubvolReadonly
			} else {
				ri.Flags &^= disk.RootSubvolReadonly
			}
		})
	})
}

// SetDefaultSubvolume makes subvolume id the one the kernel mounts when
// no subvol= option is given (`btrfs subvolume set-default`): the root
// tree's "default" entry names it, and the DEFAULT_SUBVOL incompat bit
// is set, as the kernel does. id 5 is the top level.
func (fsys *FS) SetDefaultSubvolume(id uint64) error {
	return fsys.change("set-default", ".", func(c *wctx) (bool, error) {
		sid := disk.ObjectID(id)
		if !sid.IsFSTree() {
			return false, fmt.Errorf("tree %d is not a subvolume: %w", id, syscall.EINVAL)
		}
		if _, err := c.t.RootItem(sid); err != nil {
			return false, fmt.Errorf("subvolume %d: %w", id, syscall.ENOENT)
		}
		rt, err := c.t.Tree(disk.RootTreeObjectID)
		if err != nil {
			return false, err
		}
		name := []byte("default")
		k := disk.Key{ObjectID: disk.RootTreeDirObjectID, Type: disk.DirItemKey, Offset: disk.NameHash(name)}
		// The kernel and mkfs.btrfs name a subvolume by its root key,
		// offset 0; mkfs.btrfs names the top level with offset -1.
		loc := disk.Key{ObjectID: sid, Type: disk.RootItemKey}
		if sid == disk.FSTreeObjectID {
			loc.Offset = ^uint64(0)
		}
		found := false
		err = rt.UpdateItem(c.tx, k, func(b []byte) error {
			items, err := disk.ParseDirItems(b)
			if err != nil {
				return &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &k, What: "default dir item", Err: err}
			}
			for i := range items {
				if string(items[i].Name) == "default" {
					items[i].Location = loc
					found = true
				}
			}
			disk.EncodeDirItems(b, items)
			return nil
		})
		if err == nil && !found {
			err = ctree.ErrNotFound
		}
		if err != nil {
			// The kernel refuses too when mkfs left no default entry.
			return false, fmt.Errorf("root tree has no default entry: %w", err)
		}
		c.t.SetIncompat(disk.IncompatDefaultSubvol)
		return true, nil
	})
}

// updateRootItem rewrites the ROOT_ITEM of subvolume id in place (its
// size does not change) through fn.
func (c *wctx) updateRootItem(id disk.ObjectID, fn func(*disk.RootItem)) error {
	rt, err := c.t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	var p ctree.Path
	defer p.Release()
	if _, err := rt.Search(c.tx, &p, disk.Key{ObjectID: id, Type: disk.RootItemKey}, 0, false); err != nil {
		return err
	}
	if !p.Valid() {
		if ok, err := rt.Next(c.tx, &p); err != nil || !ok {
			return fmt.Errorf("no root item of tree %d: %w", id, syscall.ENOENT)
		}
	}
	k := p.Key()
	if k.ObjectID != id || k.Type != disk.RootItemKey {
		return fmt.Errorf("no root item of tree %d: %w", id, syscall.ENOENT)
	}
	p.Release()
	return rt.UpdateItem(c.tx, k, func(b []byte) error {
		var ri disk.RootItem
		if err := ri.Decode(b); err != nil {
			return err
		}
		fn(&ri)
		// The kernel ignores the flags of a root item not marked
		// initialised (btrfs_check_and_init_root_item).
		ri.Inode.Flags |= disk.InodeRootItemInit
		ri.Encode(b)
		return nil
	})
}
