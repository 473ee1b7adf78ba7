package btrfs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// DeleteSubvolume removes the subvolume (or snapshot) whose root
// directory is name, with everything in it, as `btrfs subvolume delete`
// does followed by the kernel's cleaner: its directory entry, ROOT_REF,
// ROOT_BACKREF and UUID-tree entries go, and its tree is dropped in the
// same transaction: blocks and data only it references are freed (at
// the commit), and where it shares blocks with a snapshot only its
// references go, after the blocks it owns that the snapshot reaches are
// turned to name their children by address (as the kernel's drop does),
// so its snapshots outlive it. Nothing is left for a cleaner to finish,
// so the commit that holds the deletion holds all of it.
//
// As the kernel: the default subvolume is EPERM, a subvolume holding
// other subvolumes ENOTEMPTY, a name that is not a subvolume EINVAL (or
// ENOTDIR; the placeholder a snapshot shows for a subvolume nested in
// its source is EINVAL too). A subvolume changed in the running
// transaction is committed first (its new blocks have no extent items
// until the commit). DeleteSubvolumeWith can leave the drop to a
// cleaner instead, as the kernel does.
func (fsys *FS) DeleteSubvolume(name string) error {
	return fsys.DeleteSubvolumeWith(name, nil)
}

// DeleteSubvolumeOptions tune DeleteSubvolumeWith. The zero value is
// DeleteSubvolume's: the tree is dropped in the same transaction.
type DeleteSubvolumeOptions struct {
	// DeferDrop leaves the tree to be dropped later, as the kernel's
	// subvolume deletion leaves it to its cleaner: the name, ROOT_REF,
	// ROOT_BACKREF and UUID entries go, the ROOT_ITEM stays with refs 0
	// and an ORPHAN_ITEM marks it (drop_progress zero: not begun). The
	// kernel's cleaner drops it at its next read-write mount, and so
	// does the next OpenWritable, before anything else; until then its
	// space stays used. The deletion costs the same whatever the
	// subvolume's size, and a subvolume changed in the running
	// transaction needs no commit first.
	DeferDrop bool
}

// DeleteSubvolumeWith is DeleteSubvolume with options; nil opts are the
// zero value.
func (fsys *FS) DeleteSubvolumeWith(name string, opts *DeleteSubvolumeOptions) error {
	var o DeleteSubvolumeOptions
	if opts != nil {
		o = *opts
	}
	return fsys.retryTreeChanged(func() error { return fsys.deleteSubvolumeOnce(name, o.DeferDrop) })
}

// retryTreeChanged runs change, one that drops subvolume trees, and again
// after a commit when a tree it would drop was changed in the running
// transaction (txn.ErrTreeChanged, returned before anything changed),
// up to three times.
func (fsys *FS) retryTreeChanged(change func() error) error {
	for attempt := 0; ; attempt++ {
		err := change()
		if !errors.Is(err, txn.ErrTreeChanged) || attempt == 3 {
			return err
		}
		if err := fsys.Commit(); err != nil {
			return err
		}
	}
}

func (fsys *FS) deleteSubvolumeOnce(name string, deferDrop bool) error {
	return fsys.change("subvolume delete", name, func(c *wctx) (bool, error) {
		if name == "." {
			return false, syscall.EBUSY
		}
		parent, base, err := c.splitParent(name)
		if err != nil {
			return false, err
		}
		if err := notPinned(parent); err != nil {
			return false, err
		}
		de, err := c.dirEntry(parent.ino, base)
		if err != nil {
			return false, err
		}
		if de == nil {
			return false, syscall.ENOENT
		}
		if de.Location.Type != disk.RootItemKey {
			if de.Type == disk.FtDir {
				return false, fmt.Errorf("not a subvolume: %w", syscall.EINVAL)
			}
			return false, syscall.ENOTDIR
		}
		l, err := c.linkOf(parent, base, de)
		if err != nil {
			return false, err
		}
		if l == nil {
			return false, fmt.Errorf("not a subvolume (a snapshot's placeholder of a subvolume nested in its source): %w", syscall.EINVAL)
		}
		if err := c.checkDeletable(l.id); err != nil {
			return false, err
		}
		if deferDrop {
			return c.orphanSubvol(parent, base, l)
		}
		return c.deleteSubvol(parent, base, l)
	})
}

// orphanSubvol is deleteSubvol leaving the tree for a cleaner
// (DeleteSubvolumeOptions.DeferDrop): UUID entries, link and refs go,
// the ROOT_ITEM gets refs 0 and an orphan item (txn.OrphanTree).
func (c *wctx) orphanSubvol(parent *winode, base string, l *subvolLink) (bool, error) {
	if err := c.checkDirSize(parent, base); err != nil {
		return false, err
	}
	ri, err := c.t.RootItem(l.id)
	if err != nil {
		return false, err
	}
	c.cache.mu.Lock()
	clear(c.cache.dirs)
	c.cache.mu.Unlock()
	if err := c.removeSubvolUUIDs(l.id, ri.UUID, ri.ReceivedUUID); err != nil {
		return true, err
	}
	if err := c.t.OrphanTree(l.id); err != nil {
		return true, err
	}
	if err := c.dropSubvolName(parent, base, l); err != nil {
		return true, err
	}
	c.touch(parent, c.now(), true)
	return true, c.putInode(parent)
}

// deleteSubvol deletes subvolume l, linked as base in parent (c.tr is
// parent's tree), within the running change, once the caller has made
// its own refusals (checkDeletable; Remove also that it is empty): its
// tree is dropped (dropSubvolTree), its link and refs go
// (dropSubvolName), the parent gets new times. DeleteSubvolume and
// Remove share it, so each checks and deletes in one change. Everything
// it can check (the parent's size, the drop's plan) is checked before
// the first change.
func (c *wctx) deleteSubvol(parent *winode, base string, l *subvolLink) (bool, error) {
	if err := c.checkDirSize(parent, base); err != nil {
		return false, err
	}
	d, err := c.planSubvolDrop(l.id)
	if err != nil {
		return false, err
	}
	// From here on the change is under way. The tree goes first: its
	// plan counted the references its blocks hold now, which editing the
	// parent's tree could change, should the two share blocks (a
	// snapshot of the parent inside it, which the kernel makes).
	if err := c.dropSubvolTree(d); err != nil {
		return true, err
	}
	if err := c.dropSubvolName(parent, base, l); err != nil {
		return true, err
	}
	c.touch(parent, c.now(), true)
	return true, c.putInode(parent)
}

// subvolDrop is the drop of a subvolume's tree, planned before the
// change begins (planSubvolDrop) and carried out by dropSubvolTree.
type subvolDrop struct {
	id             disk.ObjectID
	uuid, received disk.UUID
	plan           *txn.DropPlan // nil: planned again when carried out
}

// planSubvolDrop plans dropping subvolume id's tree (txn.PlanDrop), which
// reads and checks every block it will free and changes nothing.
func (c *wctx) planSubvolDrop(id disk.ObjectID) (*subvolDrop, error) {
	ri, err := c.t.RootItem(id)
	if err != nil {
		return nil, err
	}
	plan, err := c.t.PlanDrop(id)
	if err != nil {
		return nil, err
	}
	return &subvolDrop{id: id, uuid: ri.UUID, received: ri.ReceivedUUID, plan: plan}, nil
}

// dropSubvolTree removes subvolume d.id's UUID-tree entries and drops its
// tree with its ROOT_ITEM; the caller removes its link. The writer's
// remembered directories and shared-block verdicts are forgotten: paths
// through the subvolume now fail, and references of blocks other trees
// share change.
func (c *wctx) dropSubvolTree(d *subvolDrop) error {
	c.cache.mu.Lock()
	clear(c.cache.dirs)
	clear(c.cache.shared)
	c.cache.mu.Unlock()
	if err := c.removeSubvolUUIDs(d.id, d.uuid, d.received); err != nil {
		return err
	}
	plan := d.plan
	if plan == nil {
		var err error
		if plan, err = c.t.PlanDrop(d.id); err != nil {
			return err
		}
	}
	_, err := c.t.Drop(plan)
	return err
}

// removeSubvolUUIDs removes subvolume id's UUID-tree entries: the one of
// its uuid, and of its received uuid when it has one.
func (c *wctx) removeSubvolUUIDs(id disk.ObjectID, uuid, received disk.UUID) error {
	if err := c.removeUUID(uuid, disk.UUIDKeySubvol, id); err != nil {
		return err
	}
	if received == (disk.UUID{}) {
		return nil
	}
	return c.removeUUID(received, disk.UUIDKeyReceivedSubvol, id)
}

// checkDeletable refuses the subvolumes the kernel refuses to delete:
// the default one (EPERM) and one holding other subvolumes (ENOTEMPTY).
func (c *wctx) checkDeletable(id disk.ObjectID) error {
	if err := c.checkNotDefault(id); err != nil {
		return err
	}
	n, err := c.nestedLinks(id)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("subvolume %d holds other subvolumes: %w", id, syscall.ENOTEMPTY)
	}
	return nil
}

// checkNotDefault refuses (EPERM) to delete the default subvolume, the
// one the root tree's "default" entry names.
func (c *wctx) checkNotDefault(id disk.ObjectID) error {
	rt, err := c.t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	name := []byte("default")
	k := disk.Key{ObjectID: disk.RootTreeDirObjectID, Type: disk.DirItemKey, Offset: disk.NameHash(name)}
	data, found, err := rt.Lookup(c.tx, k)
	if err != nil || !found {
		return err
	}
	items, err := disk.ParseDirItems(data)
	if err != nil {
		return &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &k, What: "default dir item", Err: err}
	}
	for _, it := range items {
		if string(it.Name) == "default" && it.Location.ObjectID == id {
			return fmt.Errorf("the default subvolume cannot be deleted: %w", syscall.EPERM)
		}
	}
	return nil
}

// nestedLinks counts the subvolumes linked in subvolume id: its
// ROOT_REFs in the root tree.
func (c *wctx) nestedLinks(id disk.ObjectID) (int, error) {
	rt, err := c.t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return 0, err
	}
	n := 0
	err = rt.Range(c.tx, disk.Key{ObjectID: id, Type: disk.RootRefKey}, disk.Key{ObjectID: id, Type: disk.RootRefKey, Offset: ^uint64(0)},
		func(disk.Key, []byte) (bool, error) {
			n++
			return true, nil
		})
	return n, err
}

// removeUUID takes id out of the UUID-tree item of u and kind, deleting
// the item when it was the only one there.
func (c *wctx) removeUUID(u disk.UUID, kind disk.KeyType, id disk.ObjectID) error {
	ut, err := c.t.Tree(disk.UUIDTreeObjectID)
	if err != nil {
		if errors.Is(err, txn.ErrNoTree) {
			return nil
		}
		return err
	}
	k := disk.UUIDKey(u, kind)
	data, found, err := ut.Lookup(c.tx, k)
	if err != nil || !found {
		return err
	}
	var ids disk.UUIDItem
	if err := ids.Decode(data); err != nil {
		return &disk.CorruptError{Tree: disk.UUIDTreeObjectID, Key: &k, What: "uuid item", Err: err}
	}
	keep := ids[:0]
	for _, v := range ids {
		if disk.ObjectID(v) != id {
			keep = append(keep, v)
		}
	}
	if len(keep) == len(ids) {
		return nil
	}
	if len(keep) == 0 {
		_, err := ut.DeleteItem(c.tx, k)
		return err
	}
	buf := make([]byte, keep.Size())
	keep.Encode(buf)
	if err := ut.UpdateItem(c.tx, k, func(b []byte) error { copy(b, buf); return nil }); err != nil {
		return err
	}
	_, err = ut.TruncateItem(c.tx, k, len(buf), true)
	return err
}

// finishDrops drops the trees of subvolumes the kernel deleted but whose
// cleaner had not finished when the filesystem was last unmounted (or
// lost power): ROOT_ITEM refs 0 and an ORPHAN_ITEM in the root tree,
// drop_progress set when part of the tree is gone already. As the
// cleaner would after a mount, each tree is dropped from where the
// kernel left it (txn.PlanDrop follows drop_progress), the ROOT_ITEM and
// the orphan item deleted, and the result committed before the FS is
// handed out. Nothing happens without such a subvolume.
func (fsys *FS) finishDrops() error {
	dead := fsys.w.tfs.DeadTrees()
	if len(dead) == 0 {
		return nil
	}
	for attempt := 0; ; attempt++ {
		err := fsys.change("finish subvolume drops", ".", func(c *wctx) (bool, error) {
			plans := make([]*txn.DropPlan, 0, len(dead))
			for _, id := range dead {
				plan, err := c.t.PlanDrop(id)
				if err != nil {
					return false, fmt.Errorf("deleted subvolume %d: %w", id, err)
				}
				plans = append(plans, plan)
			}
			for i, plan := range plans {
				if i > 0 && plan.Shared() {
					// Planned before the drops ahead of it took their
					// references away: a block it shares with one of
					// them may be its own now. Planned again; the
					// first pass above already refused what it could.
					var err error
					if plan, err = c.t.PlanDrop(dead[i]); err != nil {
						return true, fmt.Errorf("deleted subvolume %d: %w", dead[i], err)
					}
				}
				if _, err := c.t.Drop(plan); err != nil {
					return true, err
				}
				if err := c.t.DeleteOrphanRoot(dead[i]); err != nil {
					return true, err
				}
			}
			return true, nil
		})
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
		if errors.Is(err, txn.ErrTreeChanged) && attempt < 3 {
			if err := fsys.Commit(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		return fsys.Commit()
	}
}
