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

// treeExtent is what the extent tree holds for one tree block: its
// extent item, whose inline references come first, and the references
// kept as items of their own past the room in the item
// ((bytenr, TREE_BLOCK_REF, root) and (bytenr, SHARED_BLOCK_REF,
// parent), with empty bodies). item.Refs counts both.
type treeExtent struct {
	key   disk.Key // the extent item's key; zero for a block made in this transaction
	item  *disk.ExtentItem
	keyed []treeRef
}

// has reports whether the block holds reference r, inline or as an item.
func (x *treeExtent) has(r treeRef) bool {
	return slices.ContainsFunc(x.item.InlineRefs, func(ir disk.InlineRef) bool { return ir.Type == r.typ && ir.Offset == r.off }) ||
		slices.Contains(x.keyed, r)
}

// full reports whether the block names its children by its address.
func (x *treeExtent) full() bool { return x.item.Flags&disk.ExtentFlagFullBackref != 0 }

// clone returns a copy x can be changed through without changing x.
func (x *treeExtent) clone() *treeExtent {
	it := *x.item
	it.InlineRefs = slices.Clone(x.item.InlineRefs)
	return &treeExtent{key: x.key, item: &it, keyed: slices.Clone(x.keyed)}
}

// maxInlineTreeItem is the size a tree block's extent item stays below:
// a reference that would take it to this size or past it is added as an
// item of its own. It is the kernel's room for an extent item, a
// sixteenth of a leaf's data area less an item header (224 bytes with 4
// KiB nodes: 22 references in a skinny METADATA_ITEM; 992 with 16 KiB:
// 107), btrfs-format.md §5.9.
func (t *Txn) maxInlineTreeItem() int {
	return disk.LeafDataSize(int(t.fs.sb.NodeSize))/16 - disk.ItemSize
}

// applyTreeRefDelta changes x by d: a reference that goes is removed
// where it is (inline or its item of its own), one that comes is added
// inline while the extent item stays below maxItem bytes, else as an
// item of its own.
func applyTreeRefDelta(a disk.LogicalAddr, x *treeExtent, d *treeRefDelta, maxItem int) error {
	if d == nil {
		return nil
	}
	it := x.item
	it.Flags |= d.setFlags
	// Removals first, then additions, each in a fixed order so the
	// result does not depend on map order.
	rs := make([]treeRef, 0, len(d.refs))
	for r := range d.refs {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, compareTreeRefs)
	for _, r := range rs {
		for n := d.refs[r]; n < 0; n++ {
			if it.Refs == 0 {
				return fmt.Errorf("%w: tree block %d: %v reference %d to drop, but no references counted", disk.ErrCorrupt, a, r.typ, r.off)
			}
			if at := slices.IndexFunc(it.InlineRefs, func(ir disk.InlineRef) bool { return ir.Type == r.typ && ir.Offset == r.off }); at >= 0 {
				it.InlineRefs = slices.Delete(it.InlineRefs, at, at+1)
			} else if at := slices.Index(x.keyed, r); at >= 0 {
				x.keyed = slices.Delete(x.keyed, at, at+1)
			} else {
				return fmt.Errorf("%w: tree block %d: no %v reference %d to drop, inline or as an item", disk.ErrCorrupt, a, r.typ, r.off)
			}
			it.Refs--
		}
	}
	for _, r := range rs {
		for n := d.refs[r]; n > 0; n-- {
			if x.has(r) {
				return fmt.Errorf("txn: tree block %d: %v reference %d added twice", a, r.typ, r.off)
			}
			if it.Size()+disk.InlineRefSize(r.typ) < maxItem {
				it.InlineRefs = append(it.InlineRefs, disk.InlineRef{Type: r.typ, Offset: r.off})
			} else {
				x.keyed = append(x.keyed, r)
			}
			it.Refs++
		}
	}
	// The kernel keeps inline references by type, then descending
	// root or parent; the items sort by key.
	disk.SortInlineRefs(it.InlineRefs)
	slices.SortFunc(x.keyed, compareTreeRefs)
	return nil
}

// compareTreeRefs orders references as their items' keys sort.
func compareTreeRefs(x, y treeRef) int {
	return cmp.Or(cmp.Compare(x.typ, y.typ), cmp.Compare(x.off, y.off))
}

// treeBlockExtent returns what the extent tree will hold for the tree
// block at a (of level) when the commit has applied the pending changes.
// A block made in this transaction has no item yet: it counts one
// reference, its owner's.
func (t *Txn) treeBlockExtent(a disk.LogicalAddr, level int) (*treeExtent, error) {
	t.mu.Lock()
	info, fresh := t.live[a]
	var d *treeRefDelta
	if x := t.treeRefs[a]; x != nil {
		d = &treeRefDelta{level: x.level, refs: maps.Clone(x.refs), setFlags: x.setFlags}
	}
	t.mu.Unlock()
	var x *treeExtent
	if fresh {
		x = &treeExtent{item: &disk.ExtentItem{Refs: 1, Generation: t.gen, Flags: disk.ExtentFlagTreeBlock,
			InlineRefs: []disk.InlineRef{{Type: disk.TreeBlockRefKey, Offset: uint64(info.owner)}}}}
	} else {
		var err error
		if x, err = t.extentOfBlock(a, level); err != nil {
			return nil, err
		}
	}
	if err := applyTreeRefDelta(a, x, d, t.maxInlineTreeItem()); err != nil {
		return nil, err
	}
	return x, nil
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
		x, err := t.extentOfBlock(a, d.level)
		if err != nil {
			return err
		}
		before := slices.Clone(x.keyed)
		if err := applyTreeRefDelta(a, x, d, t.maxInlineTreeItem()); err != nil {
			return err
		}
		it := x.item
		for _, r := range before {
			if !slices.Contains(x.keyed, r) {
				k := disk.Key{ObjectID: disk.ObjectID(a), Type: r.typ, Offset: r.off}
				if _, err := et.DeleteItem(t.tx, k); err != nil {
					return fmt.Errorf("delete %v of block %d: %w", k, a, err)
				}
			}
		}
		if it.Refs == 0 {
			if len(it.InlineRefs) != 0 || len(x.keyed) != 0 {
				return disk.Corruptf("tree block %d: no references counted but %d inline and %d items", a, len(it.InlineRefs), len(x.keyed))
			}
			if _, err := et.DeleteItem(t.tx, x.key); err != nil {
				return fmt.Errorf("delete extent item of block %d: %w", a, err)
			}
			t.freeCommitted(a)
			continue
		}
		buf := make([]byte, it.Size())
		it.Encode(buf)
		if _, err := et.DeleteItem(t.tx, x.key); err != nil {
			return fmt.Errorf("extent item of block %d: %w", a, err)
		}
		if err := et.InsertItem(t.tx, x.key, buf); err != nil {
			return fmt.Errorf("extent item of block %d: %w", a, err)
		}
		for _, r := range x.keyed {
			if !slices.Contains(before, r) {
				k := disk.Key{ObjectID: disk.ObjectID(a), Type: r.typ, Offset: r.off}
				if err := et.InsertItem(t.tx, k, nil); err != nil {
					return fmt.Errorf("insert %v of block %d: %w", k, a, err)
				}
			}
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
