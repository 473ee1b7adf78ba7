package ctree

import "github.com/gobtrfs/btrfs/internal/disk"

// CopyRoot makes a new tree owned by owner whose root block is a copy of
// src's root (the first step of a snapshot, as the kernel's
// btrfs_copy_root): same items or pointers, a new address, this
// generation, the new owner. The blocks under the root are not copied:
// both roots point at them afterwards, so the caller must add a
// reference for owner to each of them (or, for a leaf root, to the data
// its file extents name) before the transaction commits. src is not
// changed; its root stays where it was.
func CopyRoot(tx *Trans, src *Tree, owner disk.ObjectID, opts Options) (*Tree, error) {
	t := newTree(owner, opts)
	b := src.readLockRoot()
	nb, err := tx.copyBlock(t, b)
	b.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	nb.mu.Unlock()
	t.root.Store(nb)
	return t, nil
}
