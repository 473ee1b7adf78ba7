package btrfs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// SetSubvolumeReadOnly sets or clears the read-only flag of subvolume id
// (its ROOT_ITEM's RDONLY flag), as `btrfs property set ... ro` does. A
// read-only subvolume refuses changes (EROFS). The top level (5) cannot
// be made read-only here (EINVAL), nor can a missing id (ENOENT).
func (fsys *FS) SetSubvolumeReadOnly(id uint64, readOnly bool) error {
	return fsys.change("set ro", ".", func(c *wctx) (bool, error) {
		sid := disk.ObjectID(id)
		if sid == disk.FSTreeObjectID || !sid.IsFSTree() {
			return false, fmt.Errorf("%d: not a subvolume that can be made read-only: %w", id, syscall.EINVAL)
		}
		rt, err := c.t.Tree(disk.RootTreeObjectID)
		if err != nil {
			return false, err
		}
		// A snapshot's ROOT_ITEM key has its creation transid as offset:
		// find the key first.
		var key disk.Key
		found := false
		err = rt.Range(c.tx, disk.Key{ObjectID: sid, Type: disk.RootItemKey},
			disk.Key{ObjectID: sid, Type: disk.RootItemKey, Offset: ^uint64(0)},
			func(k disk.Key, _ []byte) (bool, error) {
				key, found = k, true
				return false, nil
			})
		if err != nil {
			return false, err
		}
		if !found {
			return false, fmt.Errorf("subvolume %d: %w", id, fs.ErrNotExist)
		}
		ri, err := c.t.RootItem(sid)
		if err != nil {
			if errors.Is(err, txn.ErrNoTree) {
				err = fmt.Errorf("subvolume %d: %w", id, fs.ErrNotExist)
			}
			return false, err
		}
		want := ri.Flags &^ disk.RootSubvolReadonly
		if readOnly {
			want |= disk.RootSubvolReadonly
		}
		if want == ri.Flags {
			return false, nil
		}
		err = rt.UpdateItem(c.tx, key, func(b []byte) error {
			var r disk.RootItem
			if err := r.Decode(b); err != nil {
				return &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &key, What: "root item", Err: err}
			}
			r.Flags = want
			// The kernel resets the flags of a root whose inode lacks
			// ROOT_ITEM_INIT when it loads it, and sets the bit on update.
			r.Inode.Flags |= disk.InodeRootItemInit
			if r.Size() != len(b) {
				return disk.Corruptf("root item of subvolume %d: %d bytes", id, len(b))
			}
			r.Encode(b)
			return nil
		})
		return true, err
	})
}
