package txn

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrTreeChanged is returned by SnapshotTree and PlanDrop when the
// tree has changed in the running transaction: its new blocks have no
// extent items yet (Commit makes them), so references to them cannot be
// counted. Commit first, then try again in the next transaction.
var ErrTreeChanged = errors.New("txn: tree changed in this transaction")

// SnapshotTree makes tree id a snapshot of tree src, as the kernel makes
// one: the root block is copied (owned by id), and every block or data
// extent the root points at gets a reference from id, so both trees share
// everything below their roots. item is the new ROOT_ITEM (the caller
// sets its UUIDs, times, flags and last_snapshot); its root location and
// generations are filled in here, and its key is (id, ROOT_ITEM, this
// generation) as for every snapshot. The source's ROOT_ITEM gets
// last_snapshot = this generation, which is what tells the kernel that
// the source's blocks may be shared.
//
// The references are recorded for the commit (treerefs.go). A source
// whose root's children keep references as items of their own, or more
// than this package keeps inline, is refused with ErrUnsupported before
// anything changes.
func (t *Txn) SnapshotTree(src, id disk.ObjectID, item disk.RootItem) (*ctree.Tree, error) {
	rt, err := t.checkNewTree(id)
	if err != nil {
		return nil, err
	}
	st, err := t.Tree(src)
	if err != nil {
		return nil, err
	}
	sr := st.Root()
	if sr.Generation >= t.gen {
		return nil, ErrTreeChanged
	}
	// Check every reference first, so a refusal changes nothing.
	srcNode, ok := t.tx.Snapshot(sr.Addr)
	if !ok {
		return nil, fmt.Errorf("txn: root block %d of tree %d not loaded", sr.Addr, src)
	}
	if !srcNode.IsLeaf() {
		for i := range srcNode.NumItems() {
			if _, err := t.treeBlockRefItem(srcNode.KeyPtr(i).BlockPtr, srcNode.Level()-1); err != nil {
				return nil, err
			}
		}
	}
	nt, err := ctree.CopyRoot(t.tx, st, id, t.fs.treeOptions(id))
	if err != nil {
		return nil, err
	}
	r := nt.Root()
	if err := t.refRootChildren(srcNode, id); err != nil {
		return nil, err
	}
	item.Bytenr, item.Level, item.Generation = r.Addr, uint8(r.Level), r.Generation
	item.Legacy = false
	item.GenerationV2 = r.Generation
	key := disk.Key{ObjectID: id, Type: disk.RootItemKey, Offset: uint64(t.gen)}
	buf := make([]byte, item.Size())
	item.Encode(buf)
	if err := rt.InsertItem(t.tx, key, buf); err != nil {
		return nil, err
	}
	t.treesMu.Lock()
	t.trees[id] = nt
	t.rootKeys[id] = key
	t.setUsedLocked(id, nt, item.BytesUsed) // a snapshot starts with its source's
	t.setLastSnapLocked(id, item.LastSnapshot)
	t.setLastSnapLocked(src, t.gen)
	t.treesMu.Unlock()
	err = rt.UpdateItem(t.tx, t.rootKeys[src], func(b []byte) error {
		var ri disk.RootItem
		if err := ri.Decode(b); err != nil {
			return err
		}
		ri.LastSnapshot = t.gen
		ri.Encode(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("root item of tree %d: %w", src, err)
	}
	return nt, nil
}

// refRootChildren adds a reference from tree id to everything the copied
// root block n points at: each child block of a node, or each data
// extent a leaf's file extent items name (the EXTENT_DATA_REF triple of
// id, the inode and the file position less the extent offset).
func (t *Txn) refRootChildren(n disk.Node, id disk.ObjectID) error {
	if !n.IsLeaf() {
		for i := range n.NumItems() {
			if err := t.addTreeBlockRef(n.KeyPtr(i).BlockPtr, n.Level()-1, id); err != nil {
				return err
			}
		}
		return nil
	}
	return leafDataRefs(n, id, func(d dataRefChange) error {
		return t.AddDataRef(d.bytenr, d.numBytes, id, d.ino, d.offset, 1)
	})
}

// treeBlockRefItem returns the extent item of the tree block at a (of
// level) as the commit will leave it (treeBlockExtent) and checks that
// SnapshotTree can add to it: every reference inline, and room for one
// more. How the block names its own children (FULL_BACKREF or not) does
// not matter: the snapshot's keyed reference is to the block itself.
func (t *Txn) treeBlockRefItem(a disk.LogicalAddr, level int) (*disk.ExtentItem, error) {
	_, it, err := t.treeBlockExtent(a, level)
	if err != nil {
		return nil, err
	}
	if !inlineOnly(it) || len(it.InlineRefs) >= maxInlineTreeRefs {
		return nil, fmt.Errorf("%w: snapshot of a subvolume whose tree blocks have references held as items of their own, or many (block %d: %d references)",
			ErrUnsupported, a, it.Refs)
	}
	return it, nil
}

// extentItemOfBlock finds and decodes the committed extent item of the
// tree block at a (of level): a skinny METADATA_ITEM, or an EXTENT_ITEM
// with a tree block info on filesystems without skinny metadata. Pending
// reference changes are not in it (treeBlockExtent adds them).
func (t *Txn) extentItemOfBlock(a disk.LogicalAddr, level int) (disk.Key, *disk.ExtentItem, error) {
	et, err := t.Tree(disk.ExtentTreeObjectID)
	if err != nil {
		return disk.Key{}, nil, err
	}
	key := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.MetadataItemKey, Offset: uint64(level)}
	if t.fs.sb.IncompatFlags&disk.IncompatSkinnyMetadata == 0 {
		key.Type, key.Offset = disk.ExtentItemKey, uint64(t.fs.sb.NodeSize)
	}
	data, found, err := et.Lookup(t.tx, key)
	if err != nil {
		return disk.Key{}, nil, err
	}
	if !found {
		return disk.Key{}, nil, &disk.CorruptError{Logical: a, Tree: disk.ExtentTreeObjectID, Key: &key, What: "tree block without extent item"}
	}
	var it disk.ExtentItem
	if err := it.DecodeAs(key.Type, data); err != nil {
		return disk.Key{}, nil, &disk.CorruptError{Logical: a, Tree: disk.ExtentTreeObjectID, Key: &key, What: "extent item", Err: err}
	}
	if it.Flags&disk.ExtentFlagTreeBlock == 0 {
		return disk.Key{}, nil, &disk.CorruptError{Logical: a, Tree: disk.ExtentTreeObjectID, Key: &key, What: "tree block's extent item without TREE_BLOCK flag"}
	}
	return key, &it, nil
}

// addTreeBlockRef records the inline TREE_BLOCK_REF of root on the tree
// block at a, for the commit to add (treerefs.go), after checking the
// block takes one.
func (t *Txn) addTreeBlockRef(a disk.LogicalAddr, level int, root disk.ObjectID) error {
	if _, err := t.treeBlockRefItem(a, level); err != nil {
		return err
	}
	t.addTreeRef(a, level, treeRef{disk.TreeBlockRefKey, uint64(root)}, 1)
	return nil
}
