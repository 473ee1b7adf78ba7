package btrfs

import (
	"crypto/rand"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// SnapshotOptions tune Snapshot. The zero value makes a writable snapshot
// with a random UUID, stamped with the current time.
type SnapshotOptions struct {
	// ReadOnly makes a read-only snapshot (`btrfs subvolume snapshot -r`).
	ReadOnly bool
	// UUID of the snapshot; all zero means random. Reproducible image
	// builds derive it from their input.
	UUID [16]byte
	// Time is the snapshot's creation time (otime); zero means now.
	Time time.Time
}

// Snapshot makes dst a snapshot of the subvolume whose root directory is
// src ("." for the view's own subvolume), as `btrfs subvolume snapshot
// [-r] SRC DST` does on a mount, and returns its id. The snapshot shares
// the source's tree: its root block is a copy, everything under it gets a
// reference from the snapshot (the kernel's model of shared tree blocks),
// so it costs one block whatever the subvolume's size. Its ROOT_ITEM is
// set as the kernel sets a snapshot's: parent_uuid is the source's UUID,
// ctransid and ctime are the source's, otransid and otime the snapshot's,
// and the received UUID is kept only on a read-only snapshot; the source
// records the snapshot's generation in last_snapshot. Nested subvolumes
// of the source show in the snapshot as empty directories, as on Linux.
//
// Changes of the source not yet committed are committed first: the
// snapshot holds everything done before the call. The snapshot is
// committed too (with whatever else the transaction holds), as the
// kernel makes a snapshot in a commit: changes to it start in the next
// transaction.
//
// The source and the snapshot stay writable: a change copies the blocks
// they share by the kernel's reference rules (tree blocks and data
// extents referenced by root or by parent block, inline in the extent
// item or, past its room, as items of their own, so any number of
// snapshots may share a tree). Not yet supported (issue 14), and refused
// with ErrUnsupported before anything changes: a snapshot whose directory
// is inside the source itself.
//
// src that is not a subvolume's root directory is EINVAL; dst errors as
// for Mkdir.
func (fsys *FS) Snapshot(src, dst string, opts *SnapshotOptions) (uint64, error) {
	var o SnapshotOptions
	if opts != nil {
		o = *opts
	}
	if o.Time.IsZero() {
		o.Time = fsys.now()
	}
	if o.UUID == ([16]byte{}) {
		if _, err := rand.Read(o.UUID[:]); err != nil {
			return 0, err
		}
	}
	for attempt := 0; ; attempt++ {
		id, err := fsys.snapshotOnce(src, dst, o)
		if err == nil {
			// Committed at once, as the kernel makes a snapshot in
			// a commit: a block the snapshot owns must be newer
			// than its creation generation (the ROOT_ITEM's key
			// offset), or the kernel's deletion of the snapshot,
			// taking such a block for one it cannot own, drops
			// only its reference and leaves the snapshot's keyed
			// references below it.
			return id, fsys.Commit()
		}
		if !errors.Is(err, txn.ErrTreeChanged) || attempt == 3 {
			return id, err
		}
		// The source changed in the running transaction: its new
		// blocks get their extent items at the commit.
		if err := fsys.Commit(); err != nil {
			return 0, err
		}
	}
}

// snapshotOnce is one try of Snapshot, in one change.
func (fsys *FS) snapshotOnce(src, dst string, o SnapshotOptions) (uint64, error) {
	var id disk.ObjectID
	err := fsys.change("snapshot", dst, func(c *wctx) (bool, error) {
		srcID, err := c.subvolumeAt(src)
		if err != nil {
			return false, fmt.Errorf("snapshot source %s: %w", src, err)
		}
		parent, base, err := c.newSubvolPlace(dst)
		if err != nil {
			return false, err
		}
		dstTree := c.tr
		if dstTree.Owner() == srcID {
			return false, fmt.Errorf("%w: a snapshot inside the subvolume it copies (the source would change after sharing its tree): make it in another subvolume", ErrUnsupported)
		}
		ri, err := c.t.RootItem(srcID)
		if err != nil {
			return false, err
		}
		if id, err = c.newSubvolID(); err != nil {
			return false, err
		}
		index, err := c.nextIndex(parent.ino)
		if err != nil {
			return false, err
		}
		item := snapshotRootItem(ri, o, c.gen)
		if _, err := c.t.SnapshotTree(srcID, id, item); err != nil {
			// SnapshotTree changes nothing when it fails.
			return false, err
		}
		// The source's blocks are shared now, and the blocks other
		// trees share with it have one more reference: every
		// verdict is taken again.
		c.cache.mu.Lock()
		clear(c.cache.shared)
		c.cache.mu.Unlock()
		c.tr = dstTree
		return true, c.linkSnapshot(parent, base, id, index, item, o.Time)
	})
	return uint64(id), err
}

// snapshotRootItem is the ROOT_ITEM of a snapshot of the subvolume whose
// item is src, made in transaction gen: the kernel copies the source's
// item and changes what belongs to the snapshot.
func snapshotRootItem(src *disk.RootItem, o SnapshotOptions, gen disk.Generation) disk.RootItem {
	item := *src
	item.UUID = disk.UUID(o.UUID)
	item.ParentUUID = src.UUID
	item.Flags = src.Flags &^ disk.RootSubvolReadonly
	if o.ReadOnly {
		item.Flags |= disk.RootSubvolReadonly
	} else {
		// A writable snapshot is no longer what was received.
		item.ReceivedUUID = disk.UUID{}
		item.STime, item.RTime = disk.Timespec{}, disk.Timespec{}
		item.STransID, item.RTransID = 0, 0
	}
	item.OTime = disk.TimespecOf(o.Time)
	item.OTransID = gen
	item.LastSnapshot = gen
	item.Refs = 1
	item.DropProgress, item.DropLevel = disk.Key{}, 0
	// Without ROOT_ITEM_INIT the kernel clears the flags (read-only)
	// when it loads the root.
	item.Inode.Flags |= disk.InodeRootItemInit
	return item
}

// linkSnapshot gives snapshot id its name base in parent: ROOT_REF and
// ROOT_BACKREF, the UUID-tree entries, and the directory entry, which
// names the snapshot's ROOT_ITEM with offset -1 as the kernel writes it.
func (c *wctx) linkSnapshot(parent *winode, base string, id disk.ObjectID, index uint64, item disk.RootItem, now time.Time) error {
	if err := c.subvolRefs(parent, base, id, index); err != nil {
		return err
	}
	if err := c.addUUID(item.UUID, id); err != nil {
		return err
	}
	if item.ReceivedUUID != (disk.UUID{}) {
		if err := c.addUUIDKind(item.ReceivedUUID, disk.UUIDKeyReceivedSubvol, id); err != nil {
			return err
		}
	}
	return c.addSubvolEntry(parent, base, disk.Key{ObjectID: id, Type: disk.RootItemKey, Offset: ^uint64(0)}, index, now)
}

// subvolumeAt returns the id of the subvolume whose root directory name
// is ("." is the view's own). It only reads: a read-only source is fine.
func (c *wctx) subvolumeAt(name string) (disk.ObjectID, error) {
	if name == "." {
		if c.fsys.top.dirID != c.fsys.top.item.RootDirID && c.fsys.top.dirID != disk.FirstFreeObjectID {
			return 0, syscall.EINVAL
		}
		return c.fsys.top.id, nil
	}
	parent, base, err := c.lookupParent(name)
	if err != nil {
		return 0, err
	}
	de, err := c.dirEntry(parent.ino, base)
	if err != nil {
		return 0, err
	}
	if de == nil {
		return 0, syscall.ENOENT
	}
	if de.Location.Type != disk.RootItemKey {
		if de.Type == disk.FtDir {
			return 0, fmt.Errorf("not a subvolume: %w", syscall.EINVAL)
		}
		return 0, syscall.ENOTDIR
	}
	return de.Location.ObjectID, nil
}

// sharedTreeErr says why the subvolume of tree id may not be written, or
// nil. A tree that was snapshotted (last_snapshot set) or is a snapshot
// (parent_uuid set) shares the blocks under its root with another tree
// unless its root is a leaf (a snapshot copies the root); copying them
// follows the kernel's reference rules (txn.CopyShared).
// txn.SharedWritable walks the tree's nodes and old leaves first and
// reads their references, so that a damaged block or extent item refuses
// the change before anything changes. The verdict is kept for the
// transaction (Snapshot and DeleteSubvolume drop every verdict).
func (c *wctx) sharedTreeErr(id disk.ObjectID) error {
	c.cache.mu.Lock()
	err, ok := c.cache.shared[id]
	c.cache.mu.Unlock()
	if ok {
		return err
	}
	ri, err := c.t.RootItem(id)
	if err != nil {
		return err
	}
	var verdict error
	switch {
	case ri.Level == 0 || ri.LastSnapshot == 0 && ri.ParentUUID == (disk.UUID{}):
	case ri.LastSnapshot == 0:
		// A snapshot whose ROOT_ITEM does not say which of its blocks
		// may be shared (the kernel always sets last_snapshot).
		verdict = fmt.Errorf("%w: writing subvolume %d, a snapshot without last_snapshot (the kernel can write it)", ErrUnsupported, id)
	default:
		if err := c.t.SharedWritable(id); err != nil {
			if !errors.Is(err, txn.ErrUnsupported) {
				return err
			}
			verdict = fmt.Errorf("%w (the kernel can write it)", err)
		}
	}
	c.cache.mu.Lock()
	if c.cache.shared == nil {
		c.cache.shared = map[disk.ObjectID]error{}
	}
	c.cache.shared[id] = verdict
	c.cache.mu.Unlock()
	return verdict
}
