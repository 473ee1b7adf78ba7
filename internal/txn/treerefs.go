package txn

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Delayed tree-block references: the reference changes of snapshots,
// drops and copies of shared blocks are recorded here, not edited into the
// extent tree where they happen, and Commit applies them (the kernel's
// delayed references). That lets a copy of a shared block, which runs in
// the middle of a tree operation of another tree, change references
// without editing the extent tree there, and it lets several changes of
// one block in one transaction (a reference added by a snapshot, dropped
// by a copy) meet before anything is written.

// treeRef names one reference to a tree block: TREE_BLOCK_REF keyed by
// the referring root, or SHARED_BLOCK_REF keyed by the parent block's
// address.
type treeRef struct {
	typ disk.KeyType // disk.TreeBlockRefKey or disk.SharedBlockRefKey
	off uint64       // the root id, or the parent's address
}

// treeRefDelta is the pending change of one tree block's extent item.
type treeRefDelta struct {
	level    int
	refs     map[treeRef]int // references added (> 0) or removed (< 0)
	setFlags disk.ExtentFlags
}

// treeRefsOf returns the pending change of the block at a, made on first
// use. Callers hold t.mu.
func (t *Txn) treeRefsOf(a disk.LogicalAddr, level int) *treeRefDelta {
	if t.treeRefs == nil {
		t.treeRefs = map[disk.LogicalAddr]*treeRefDelta{}
	}
	d := t.treeRefs[a]
	if d == nil {
		d = &treeRefDelta{level: level, refs: map[treeRef]int{}}
		t.treeRefs[a] = d
	}
	return d
}

// addTreeRef records that the tree block at a (of level) gains (n > 0)
// or loses (n < 0) reference r.
func (t *Txn) addTreeRef(a disk.LogicalAddr, level int, r treeRef, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.treeRefsOf(a, level)
	d.refs[r] += n
	if d.refs[r] == 0 {
		delete(d.refs, r)
	}
	t.changes++
}

// setTreeFlags records that the extent item of the block at a gets flags.
func (t *Txn) setTreeFlags(a disk.LogicalAddr, level int, flags disk.ExtentFlags) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.treeRefsOf(a, level).setFlags |= flags
	t.changes++
}

// maxInlineTreeRefs bounds the inline references one tree block's extent
// item may hold here; past it the kernel keeps references as items of
// their own, which this package does not write.
const maxInlineTreeRefs = 32

// applyTreeRefDelta returns it changed by d. References not found inline
// cannot be removed (the kernel keeps references as items of their own
// past the inline room; this package does not write or edit those).
func applyTreeRefDelta(a disk.LogicalAddr, it *disk.ExtentItem, d *treeRefDelta) error {
	if d == nil {
		return nil
	}
	it.Flags |= d.setFlags
	// Removals first, then additions, each in a fixed order so the
	// result does not depend on map order.
	rs := make([]treeRef, 0, len(d.refs))
	for r := range d.refs {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(x, y treeRef) int {
		return cmp.Or(cmp.Compare(x.typ, y.typ), cmp.Compare(x.off, y.off))
	})
	for _, r := range rs {
		for n := d.refs[r]; n < 0; n++ {
			at := slices.IndexFunc(it.InlineRefs, func(ir disk.InlineRef) bool { return ir.Type == r.typ && ir.Offset == r.off })
			if at < 0 || it.Refs == 0 {
				return fmt.Errorf("%w: tree block %d: no inline %v reference %d to drop (references held as items of their own are not written here)",
					ErrUnsupported, a, r.typ, r.off)
			}
			it.InlineRefs = slices.Delete(it.InlineRefs, at, at+1)
			it.Refs--
		}
	}
	for _, r := range rs {
		for n := d.refs[r]; n > 0; n-- {
			if slices.ContainsFunc(it.InlineRefs, func(ir disk.InlineRef) bool { return ir.Type == r.typ && ir.Offset == r.off }) {
				return fmt.Errorf("txn: tree block %d: %v reference %d added twice", a, r.typ, r.off)
			}
			it.InlineRefs = append(it.InlineRefs, disk.InlineRef{Type: r.typ, Offset: r.off})
			it.Refs++
		}
	}
	// The kernel keeps inline references by type, then descending
	// root or parent.
	disk.SortInlineRefs(it.InlineRefs)
	if len(it.InlineRefs) > maxInlineTreeRefs {
		return fmt.Errorf("%w: tree block %d would have %d references, more than this package keeps inline",
			ErrUnsupported, a, len(it.InlineRefs))
	}
	return nil
}

// treeBlockExtent returns the extent item of the tree block at a (of
// level) as the commit will leave it: the committed item with the
// pending changes applied. A block made in this transaction has no item
// yet: it counts one reference, its owner's. key is the item's key (zero
// for a new block).
func (t *Txn) treeBlockExtent(a disk.LogicalAddr, level int) (disk.Key, *disk.ExtentItem, error) {
	t.mu.Lock()
	info, fresh := t.live[a]
	var d *treeRefDelta
	if x := t.treeRefs[a]; x != nil {
		d = &treeRefDelta{level: x.level, refs: maps.Clone(x.refs), setFlags: x.setFlags}
	}
	t.mu.Unlock()
	var key disk.Key
	var it *disk.ExtentItem
	if fresh {
		it = &disk.ExtentItem{Refs: 1, Generation: t.gen, Flags: disk.ExtentFlagTreeBlock,
			InlineRefs: []disk.InlineRef{{Type: disk.TreeBlockRefKey, Offset: uint64(info.owner)}}}
	} else {
		var err error
		key, it, err = t.extentItemOfBlock(a, level)
		if err != nil {
			return disk.Key{}, nil, err
		}
	}
	if err := applyTreeRefDelta(a, it, d); err != nil {
		return disk.Key{}, nil, err
	}
	return key, it, nil
}

// inlineOnly reports whether every reference of a tree block's extent
// item is inline, so that the pending changes can be applied to it.
func inlineOnly(it *disk.ExtentItem) bool {
	return it.Refs == uint64(len(it.InlineRefs))
}

// hasRef reports whether it holds reference r inline.
func hasRef(it *disk.ExtentItem, r treeRef) bool {
	return slices.ContainsFunc(it.InlineRefs, func(ir disk.InlineRef) bool { return ir.Type == r.typ && ir.Offset == r.off })
}

// settleTreeRefs applies the pending tree-block reference changes to the
// extent items, in address order, and frees every block left with no
// reference (its extent item deleted, its space pinned until the commit
// ends, as Free does for committed blocks). It runs after the new blocks'
// items are inserted. The changes are taken out of the map first: the
// edits of the extent tree copy its blocks, which never adds changes.
func (t *Txn) settleTreeRefs(et *ctree.Tree) error {
	t.mu.Lock()
	todo := t.treeRefs
	t.treeRefs = nil
	t.mu.Unlock()
	for _, a := range sortedAddrs(todo) {
		d := todo[a]
		if len(d.refs) == 0 && d.setFlags == 0 {
			continue
		}
		t.mu.Lock()
		_, fresh := t.live[a]
		t.mu.Unlock()
		if fresh {
			// Nothing this package does changes references of blocks
			// made in the running transaction: a copy's children are
			// the old block's, which are committed.
			return fmt.Errorf("txn: reference change on tree block %d made in this transaction", a)
		}
		key, it, err := t.extentItemOfBlock(a, d.level)
		if err != nil {
			return err
		}
		if err := applyTreeRefDelta(a, it, d); err != nil {
			return err
		}
		if it.Refs == 0 {
			if len(it.InlineRefs) != 0 {
				return disk.Corruptf("tree block %d: no references counted but %d inline", a, len(it.InlineRefs))
			}
			if _, err := et.DeleteItem(t.tx, key); err != nil {
				return fmt.Errorf("delete extent item of block %d: %w", a, err)
			}
			t.freeCommitted(a)
			continue
		}
		buf := make([]byte, it.Size())
		it.Encode(buf)
		if _, err := et.DeleteItem(t.tx, key); err != nil {
			return fmt.Errorf("extent item of block %d: %w", a, err)
		}
		if err := et.InsertItem(t.tx, key, buf); err != nil {
			return fmt.Errorf("extent item of block %d: %w", a, err)
		}
	}
	return nil
}

// freeCommitted gives the space of a committed tree block whose last
// reference went back to the allocator, pinned until the commit ends.
// Its extent item is the caller's to delete.
func (t *Txn) freeCommitted(a disk.LogicalAddr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, a)
	if err := t.fs.space.Free(uint64(a), uint64(t.fs.sb.NodeSize)); err != nil && t.err == nil {
		t.err = fmt.Errorf("%w: committed tree block %d not allocated in the extent tree: %w", disk.ErrCorrupt, a, err)
	}
	t.touch(uint64(a))
}
