package txn

import (
	"fmt"
	"slices"

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

// findDeadTrees looks at the subvolumes of the committed root tree: one
// deleted but not yet cleaned up (its ROOT_ITEM has no references left;
// the kernel's cleaner frees its blocks, perhaps half done already) is
// noted in fs.dead, for the caller to finish dropping (DeadTrees).
func (fs *FS) findDeadTrees() error {
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
		if ri.Refs == 0 && !slices.Contains(fs.dead, k.ObjectID) {
			fs.dead = append(fs.dead, k.ObjectID)
		}
	}
	return err
}

// DeadTrees returns the subvolumes found deleted at open whose trees the
// kernel's cleaner had not finished dropping (ROOT_ITEM refs 0, an
// ORPHAN_ITEM in the root tree, perhaps drop_progress set): the caller
// finishes them (PlanDrop, Drop, DeleteOrphanRoot) in the first
// transaction, as the kernel's cleaner would after a mount.
func (fs *FS) DeadTrees() []disk.ObjectID { return slices.Clone(fs.dead) }

// qgroupStatusKey is the key of the quota tree's status item.
var qgroupStatusKey = disk.Key{ObjectID: 0, Type: disk.QgroupStatusKey, Offset: 0}

// loadQuota looks at the quota tree, if there is one. This package does
// not keep qgroup counts in step; as the kernel does when it cannot, the
// first commit marks them inconsistent (markQuotaInconsistent), which
// asks for a rescan (btrfs quota rescan). A rescan in progress is
// refused: its progress would skip what we change.
func (fs *FS) loadQuota() error {
	ri, _, err := fs.rootItem(disk.QuotaTreeObjectID)
	if err != nil {
		return nil // no quota tree: quotas are off
	}
	root := ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: disk.QuotaTreeObjectID}
	c := ctree.NewCursor(fs, root)
	ok, err := c.Seek(qgroupStatusKey)
	if err != nil {
		return fmt.Errorf("quota tree: %w", err)
	}
	if !ok || c.Key() != qgroupStatusKey {
		return fmt.Errorf("quota tree: %w", &disk.CorruptError{Tree: disk.QuotaTreeObjectID, What: "no qgroup status item", Err: disk.ErrCorrupt})
	}
	var st disk.QgroupStatusItem
	if err := st.Decode(c.Data()); err != nil {
		k := c.Key()
		return &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.QuotaTreeObjectID, Key: &k, What: "qgroup status item", Err: err}
	}
	switch {
	case st.Flags&disk.QgroupStatusSimpleMode != 0:
		return fmt.Errorf("%w: simple quotas (squota): disable them with the kernel (btrfs quota disable) first", ErrUnsupported)
	case st.Flags&disk.QgroupStatusRescan != 0:
		return fmt.Errorf("%w: a quota rescan in progress: let the kernel finish it (mount, then btrfs quota rescan -w)", ErrUnsupported)
	}
	fs.markQuota = st.Flags&disk.QgroupStatusInconsistent == 0
	return nil
}

// markQuotaInconsistent sets the INCONSISTENT flag of the qgroup status
// item in the first commit that changes a filesystem with quotas, with
// the commit's generation, as the kernel records it.
func (t *Txn) markQuotaInconsistent() error {
	if !t.fs.markQuota {
		return nil
	}
	qt, err := t.Tree(disk.QuotaTreeObjectID)
	if err != nil {
		return err
	}
	return qt.UpdateItem(t.tx, qgroupStatusKey, func(b []byte) error {
		var st disk.QgroupStatusItem
		if err := st.Decode(b); err != nil {
			return err
		}
		st.Flags |= disk.QgroupStatusInconsistent
		st.Generation = t.gen
		st.Encode(b)
		t.quotaMarked = true
		return nil
	})
}

// refuseSprout refuses a filesystem sprouted from a seeding device: its
// chunk tree lists devices of another filesystem (the seed's fsid in
// their DEV_ITEMs), whose chunks are read-only to the kernel too.
func (fs *FS) refuseSprout() error {
	own := fs.sb.MetadataFSID()
	c := ctree.NewCursor(fs, fs.chunkRoot())
	ok, err := c.Seek(disk.Key{ObjectID: disk.DevItemsObjectID, Type: disk.DevItemKey})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.ObjectID != disk.DevItemsObjectID || k.Type != disk.DevItemKey {
			break
		}
		var d disk.DevItem
		if err := d.Decode(c.Data()); err != nil {
			return &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.ChunkTreeObjectID, Key: &k, What: "dev item", Err: err}
		}
		if d.FSID != own {
			return fmt.Errorf("%w: a filesystem sprouted from a seeding device (devid %d belongs to filesystem %s):"+
				" change it through the kernel, or remove the seed with the kernel first (btrfs device remove %d)",
				ErrUnsupported, k.Offset, d.FSID, k.Offset)
		}
	}
	return err
}
