package txn

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Copying shared blocks (issue 14 item 1, slice b; docs/design/0023).
//
// A block of a subvolume tree no newer than the tree's last_snapshot may
// be reached from other trees too (snapshots share everything below
// their roots). Copying it must leave the old block whole for them, with
// references that still describe who points at what. The rules, with
// refs and flags read from the extent item as the commit will leave it:
//
//  1. refs 1: the old block goes; if it carried FULL_BACKREF (its
//     children are referenced by its address), the copy's children get
//     references keyed by this tree and lose those by the old address.
//  2. refs > 1, owned by this tree, no FULL_BACKREF: the old block's
//     children get references by its address (the other trees reach
//     them through it), and it gets FULL_BACKREF; the children's keyed
//     references of this tree now stand for the copy's pointers.
//  3. refs > 1 otherwise: the copy's children get references keyed by
//     this tree.
//  4. The old block loses this tree's keyed reference; the commit frees
//     it when that was the last.
//
// Children of a node are tree blocks (TREE_BLOCK_REF / SHARED_BLOCK_REF,
// recorded in treerefs.go); those of a leaf are the data extents its file
// extent items name: EXTENT_DATA_REF keyed by (root, inode, file
// position less extent offset), or SHARED_DATA_REF keyed by the leaf's
// address with a count (one per file extent item naming the extent),
// recorded with the data reference changes (data.go) and applied by the
// commit. References of either kind live inline in the extent item while
// it has room, and as items of their own past it (treerefs.go).

// setLastSnapLocked records tree id's last_snapshot; treesMu is held.
func (t *Txn) setLastSnapLocked(id disk.ObjectID, g disk.Generation) {
	if g == 0 {
		delete(t.lastSnap, id)
		return
	}
	if t.lastSnap == nil {
		t.lastSnap = map[disk.ObjectID]disk.Generation{}
	}
	t.lastSnap[id] = g
}

// lastSnapshot returns the last_snapshot of opened tree id (0: none).
func (t *Txn) lastSnapshot(id disk.ObjectID) disk.Generation {
	t.treesMu.Lock()
	defer t.treesMu.Unlock()
	return t.lastSnap[id]
}

// mayBeShared reports whether the committed block at a, of generation
// gen in tree id, may have references other than id's: made no later
// than the tree's last snapshot, or carrying pending reference changes.
func (t *Txn) mayBeShared(id disk.ObjectID, a disk.LogicalAddr, gen disk.Generation) bool {
	t.mu.Lock()
	_, fresh := t.live[a]
	_, pending := t.treeRefs[a]
	t.mu.Unlock()
	if fresh {
		return false
	}
	return pending || gen <= t.lastSnapshot(id)
}

// CopyShared implements ctree.SharedStore: the reference changes of tree
// id copying the committed block old, by rules 1 to 4 above. handled is
// false for a block only id references and without pending changes: the
// engine frees it as any other.
func (t *Txn) CopyShared(id disk.ObjectID, old disk.Node) (handled bool, err error) {
	a := old.Bytenr()
	if !t.mayBeShared(id, a, old.Generation()) {
		return false, nil
	}
	level := old.Level()
	x, err := t.treeBlockExtent(a, level)
	if err != nil {
		return false, err
	}
	it := x.item
	mine := treeRef{disk.TreeBlockRefKey, uint64(id)}
	if !x.has(mine) {
		return false, &disk.CorruptError{Logical: a, Tree: id, What: fmt.Sprintf("tree block reached from tree %d has no reference keyed by it", id)}
	}
	full := x.full()
	owned := old.Owner() == id
	var (
		keyChildren  bool // the copy's children get keyed references of id
		unparent     bool // the children lose their references by a
		parentRefs   bool // the children get references by a
		setFull      bool // a gets FULL_BACKREF
		plainRelease bool // a goes as a block only id references
	)
	switch {
	case it.Refs == 1 && full:
		keyChildren, unparent = true, true
	case it.Refs == 1 && !owned:
		return false, &disk.CorruptError{Logical: a, Tree: id,
			What: fmt.Sprintf("tree block owned by tree %d, referenced only by tree %d, without FULL_BACKREF", old.Owner(), id)}
	case it.Refs == 1:
		plainRelease = true
	case owned && !full:
		parentRefs, setFull = true, true
	default:
		keyChildren = true
	}
	if plainRelease {
		t.mu.Lock()
		_, pending := t.treeRefs[a]
		t.mu.Unlock()
		if !pending {
			return false, nil
		}
	}
	if level > 0 {
		for i := range old.NumItems() {
			c := old.KeyPtr(i).BlockPtr
			if keyChildren {
				t.addTreeRef(c, level-1, mine, 1)
			}
			if unparent {
				t.addTreeRef(c, level-1, treeRef{disk.SharedBlockRefKey, uint64(a)}, -1)
			}
			if parentRefs {
				t.addTreeRef(c, level-1, treeRef{disk.SharedBlockRefKey, uint64(a)}, 1)
			}
		}
	} else if keyChildren || unparent || parentRefs {
		// The data extents the leaf's file extent items name: keyed
		// references of id for the copy's items, references by the
		// old leaf's address (SHARED_DATA_REF, one per item) for the
		// old leaf's.
		err := leafDataRefs(old, id, func(d dataRefChange) error {
			if keyChildren {
				if err := t.AddDataRef(d.bytenr, d.numBytes, id, d.ino, d.offset, 1); err != nil {
					return err
				}
			}
			if unparent {
				if err := t.addSharedDataRef(d.bytenr, d.numBytes, a, -1); err != nil {
					return err
				}
			}
			if parentRefs {
				return t.addSharedDataRef(d.bytenr, d.numBytes, a, 1)
			}
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	if setFull {
		t.setTreeFlags(a, level, disk.ExtentFlagFullBackref)
	}
	t.addTreeRef(a, level, mine, -1)
	return true, nil
}

// SharedWritable reports whether subvolume tree id may be changed, with
// the blocks it shares with snapshots, by the rules this package writes:
// nil when every copy a change could make follows rules 1 to 4 on blocks
// and references that read back whole, an error otherwise. It walks the
// tree, reading (and so verifying) every node and every leaf no newer
// than the tree's last_snapshot and reading the references of those
// (inline and items of their own, checked against the count), so that a
// damaged block or extent item refuses the change before anything
// changes. The verdict holds for a transaction in which no snapshot of a
// tree sharing blocks with id is made.
func (t *Txn) SharedWritable(id disk.ObjectID) error {
	tr, err := t.Tree(id)
	if err != nil {
		return err
	}
	last := t.lastSnapshot(id)
	if last == 0 {
		return nil
	}
	r := tr.Root()
	return t.sharedWalk(id, disk.Expect{Bytenr: r.Addr, Level: r.Level, Generation: r.Generation, Owner: id, OwnerAny: true})
}

// sharedWalk is SharedWritable below the block e names.
func (t *Txn) sharedWalk(id disk.ObjectID, e disk.Expect) error {
	if t.mayBeShared(id, e.Bytenr, e.Generation) {
		if _, err := t.treeBlockExtent(e.Bytenr, e.Level); err != nil {
			return err
		}
	} else if e.Level == 0 {
		// Made after the last snapshot: this tree's alone, and
		// only a copy of a node above (which made it) could have
		// changed that.
		return nil
	}
	// Read (and so verified) even when a leaf: a damaged block a copy
	// could meet refuses the change here, before anything changes.
	n, ok := t.tx.Snapshot(e.Bytenr)
	if !ok {
		var err error
		if n, err = t.ReadBlock(e.Bytenr, e); err != nil {
			return err
		}
	}
	if e.Level == 0 {
		return nil
	}
	for i := range n.NumItems() {
		kp := n.KeyPtr(i)
		k := kp.Key
		ce := disk.Expect{Bytenr: kp.BlockPtr, Level: n.Level() - 1, Generation: kp.Generation, Owner: id, OwnerAny: true, FirstKey: &k}
		if err := t.sharedWalk(id, ce); err != nil {
			return err
		}
	}
	return nil
}
