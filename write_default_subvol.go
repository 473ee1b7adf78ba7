package btrfs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// SetDefaultSubvolume makes subvolume id (5 for the top level) the one
// the kernel mounts when no subvol option is given, as `btrfs subvolume
// set-default` does: the root tree's "default" entry points at it and the
// DEFAULT_SUBVOL feature is set. An id that names no subvolume is ENOENT.
func (fsys *FS) SetDefaultSubvolume(id uint64) error {
	return fsys.change("set-default", ".", func(c *wctx) (bool, error) {
		sid := disk.ObjectID(id)
		if !sid.IsFSTree() {
			return false, fmt.Errorf("%d is not a subvolume id: %w", id, syscall.EINVAL)
		}
		if _, err := c.t.RootItem(sid); err != nil {
			if errors.Is(err, txn.ErrNoTree) {
				return false, fmt.Errorf("subvolume %d: %w", id, fs.ErrNotExist)
			}
			return false, err
		}
		rt, err := c.t.Tree(disk.RootTreeObjectID)
		if err != nil {
			return false, err
		}
		name := []byte("default")
		k := disk.Key{ObjectID: disk.RootTreeDirObjectID, Type: disk.DirItemKey, Offset: disk.NameHash(name)}
		data, found, err := rt.Lookup(c.tx, k)
		if err != nil {
			return false, err
		}
		if !found {
			// The kernel refuses too: mkfs always makes the entry.
			return false, fmt.Errorf("no default directory entry in the root tree: %w", fs.ErrNotExist)
		}
		items, err := disk.ParseDirItems(data)
		if err != nil {
			return false, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &k, What: "default dir item", Err: err}
		}
		at := -1
		for i := range items {
			if string(items[i].Name) == string(name) {
				at = i
			}
		}
		if at < 0 {
			return false, fmt.Errorf("no default directory entry in the root tree: %w", fs.ErrNotExist)
		}
		// As the kernel: the subvolume's root key, offset 0, also for
		// the top level (mkfs writes -1 there; both read the same).
		items[at].Location = disk.Key{ObjectID: sid, Type: disk.RootItemKey}
		buf := make([]byte, disk.DirItemsSize(items))
		disk.EncodeDirItems(buf, items)
		err = rt.UpdateItem(c.tx, k, func(b []byte) error {
			if len(b) != len(buf) {
				return disk.Corruptf("default dir item changed size")
			}
			copy(b, buf)
			return nil
		})
		if err != nil {
			return true, err
		}
		c.t.SetIncompat(disk.IncompatDefaultSubvol)
		return true, nil
	})
}
