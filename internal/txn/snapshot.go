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
// The references are recorded for the commit (treerefs.go), inline in
// the children's extent items while they have room and as items of their
// own past it. Every child's references are read and checked before
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
			if _, err := t.treeBlockExtent(srcNode.KeyPtr(i).BlockPtr, srcNode.Level()-1); err != nil {
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

// extentOfBlock finds and decodes what the extent tree holds for the
// committed tree block at a (of level): a skinny METADATA_ITEM, or an
// EXTENT_ITEM with a tree block info on filesystems without skinny
// metadata, and the references kept as items of their own after it.
// Pending reference changes are not in it (treeBlockExtent adds them).
func (t *Txn) extentOfBlock(a disk.LogicalAddr, level int) (*treeExtent, error) {
	et, err := t.Tree(disk.ExtentTreeObjectID)
	if err != nil {
		return nil, err
	}
	x, err := t.readTreeExtent(et, a)
	if err != nil {
		return nil, err
	}
	want := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.MetadataItemKey, Offset: uint64(level)}
	if t.fs.sb.IncompatFlags&disk.IncompatSkinnyMetadata == 0 {
		want.Type, want.Offset = disk.ExtentItemKey, uint64(t.fs.sb.NodeSize)
	}
	if x == nil || x.key != want {
		return nil, &disk.CorruptError{Logical: a, Tree: disk.ExtentTreeObjectID, Key: &want, What: "tree block without extent item"}
	}
	return x, nil
}

// readTreeExtent reads the extent item of the tree block at a (either
// form) and its references kept as items of their own; nil when there is
// no extent item at a. The references must be tree-block ones, each once,
// as many as the item counts.
func (t *Txn) readTreeExtent(et *ctree.Tree, a disk.LogicalAddr) (*treeExtent, error) {
	var x *treeExtent
	var derr error
	start := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.ExtentItemKey}
	end := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.SharedBlockRefKey, Offset: ^uint64(0)}
	err := et.Range(t.tx, start, end, func(k disk.Key, data []byte) (bool, error) {
		bad := func(what string, err error) (bool, error) {
			kk := k
			derr = &disk.CorruptError{Logical: a, Tree: disk.ExtentTreeObjectID, Key: &kk, What: what, Err: err}
			return false, nil
		}
		switch k.Type {
		case disk.ExtentItemKey, disk.MetadataItemKey:
			if x != nil {
				return bad("second extent item of a tree block", nil)
			}
			var it disk.ExtentItem
			if err := it.DecodeAs(k.Type, data); err != nil {
				return bad("extent item", err)
			}
			if it.Flags&disk.ExtentFlagTreeBlock == 0 {
				return bad("tree block's extent item without TREE_BLOCK flag", nil)
			}
			for _, r := range it.InlineRefs {
				if r.Type != disk.TreeBlockRefKey && r.Type != disk.SharedBlockRefKey {
					return bad(fmt.Sprintf("tree block's extent item with a %v reference", r.Type), nil)
				}
			}
			x = &treeExtent{key: k, item: &it}
		case disk.TreeBlockRefKey, disk.SharedBlockRefKey:
			if x == nil {
				return bad("tree block reference item without extent item", nil)
			}
			if len(data) != 0 {
				return bad(fmt.Sprintf("%v item of %d bytes", k.Type, len(data)), nil)
			}
			x.keyed = append(x.keyed, treeRef{k.Type, k.Offset})
		default:
			if x != nil {
				return bad(fmt.Sprintf("%v item after a tree block's extent item", k.Type), nil)
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	if x == nil {
		return nil, nil
	}
	seen := map[treeRef]bool{}
	for _, r := range x.item.InlineRefs {
		seen[treeRef{r.Type, r.Offset}] = true
	}
	for _, r := range x.keyed {
		seen[r] = true
	}
	if n := len(x.item.InlineRefs) + len(x.keyed); len(seen) != n || uint64(n) != x.item.Refs {
		k := x.key
		return nil, &disk.CorruptError{Logical: a, Tree: disk.ExtentTreeObjectID, Key: &k,
			What: fmt.Sprintf("tree block counts %d references but has %d inline and %d items (%d different)", x.item.Refs, len(x.item.InlineRefs), len(x.keyed), len(seen))}
	}
	return x, nil
}

// addTreeBlockRef records the TREE_BLOCK_REF of root on the tree
// block at a, for the commit to add (treerefs.go), after checking the
// block takes one.
func (t *Txn) addTreeBlockRef(a disk.LogicalAddr, level int, root disk.ObjectID) error {
	x, err := t.treeBlockExtent(a, level)
	if err != nil {
		return err
	}
	if x.has(treeRef{disk.TreeBlockRefKey, uint64(root)}) {
		return disk.Corruptf("tree block %d already has a reference keyed by new tree %d", a, root)
	}
	t.addTreeRef(a, level, treeRef{disk.TreeBlockRefKey, uint64(root)}, 1)
	return nil
}
