package txn

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Kinds of filesystem the kernel or btrfs-progs write that this package
// does not keep consistent are refused here, at open, before anything is
// written, with an error that names the feature and what the user can do
// (docs/design/0021-other-kinds.md).

// refuseSuper refuses what the superblock alone shows.
func refuseSuper(sb *disk.Superblock) error {
	switch {
	case sb.Flags&disk.SuperFlagSeeding != 0:
		return fmt.Errorf("%w: seeding device (read-only by design): add a writable device with the kernel"+
			" (mount, then btrfs device add) and change the sprouted filesystem there, or clear the flag with btrfstune -S 0",
			ErrUnsupported)
	case sb.IncompatFlags&disk.IncompatSimpleQuota != 0:
		return fmt.Errorf("%w: simple quotas (squota): disable them with the kernel (btrfs quota disable) first",
			ErrUnsupported)
	}
	return nil
}

// refuseTrees refuses what the committed root tree shows: a subvolume
// deleted but not yet cleaned up (its ROOT_ITEM has no references left;
// the kernel's cleaner frees its blocks, perhaps half done already).
func (fs *FS) refuseTrees() error {
	c := ctree.NewCursor(fs, fs.rootTreeRoot())
	ok, err := c.Seek(disk.Key{ObjectID: disk.FirstFreeObjectID, Type: disk.RootItemKey})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.Type != disk.RootItemKey || k.ObjectID > disk.LastFreeObjectID {
			continue
		}
		var ri disk.RootItem
		if err := ri.Decode(c.Data()); err != nil {
			return &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k, What: "root item", Err: err}
		}
		if ri.Refs == 0 {
			return fmt.Errorf("%w: subvolume %d is deleted but not yet cleaned up: mount the filesystem with the kernel"+
				" and wait for btrfs subvolume sync to finish, then unmount", ErrUnsupported, k.ObjectID)
		}
	}
	return err
}
