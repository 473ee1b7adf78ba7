package ctree

import (
	"fmt"
)

// balanceLevel is the delete descent's pre-emptive fix of the node at
// level (balance_level, ctree-algorithms.md 6.4): a root with one pointer
// gives way to its child; a node with at most NP/4 pointers is merged into
// or refilled from its siblings, so that deleting one pointer below can
// never empty it. On return the path still names the child it followed, or
// p.nodes[level] is nil when the node was freed (the caller restarts).
// Preconditions: the node and its parent are write-locked and private.
func (t *Tree) balanceLevel(tx *Trans, p *Path, level int) error {
	mid := p.nodes[level]
	if p.locks[level] != writeLocked {
		panic(fmt.Sprintf("ctree: balance_level at level %d without a write lock", level))
	}
	parent := p.parent(level)
	if parent == nil {
		return t.collapseRoot(tx, p, level)
	}
	if mid.nritems() > tx.np()/4 {
		return nil
	}
	origPtr := mid.ptrAddr(p.slots[level])
	orig := p.slots[level]
	pslot := p.slots[level+1]
	var left, right *block
	var err error
	defer func() {
		if right != nil {
			right.mu.Unlock()
		}
		if left != nil {
			left.mu.Unlock()
		}
	}()
	if pslot > 0 {
		if left, err = t.lockSibling(tx, parent, pslot-1); err != nil {
			return err
		}
	}
	if pslot+1 < parent.nritems() {
		if right, err = t.lockSibling(tx, parent, pslot+1); err != nil {
			return err
		}
	}
	if left != nil {
		orig += left.nritems()
		if _, err := t.pushNodeLeft(tx, left, mid, true); err != nil {
			return err
		}
	}
	if right != nil {
		if _, err := t.pushNodeLeft(tx, mid, right, true); err != nil {
			return err
		}
		if right.nritems() == 0 {
			right.mu.Unlock()
			t.delPtr(p, level+1, pslot+1)
			tx.free(t, right)
			right = nil
			tx.stats.Merges.Add(1)
			t.stats.Merges.Add(1)
		} else {
			parent.setPtrKey(pslot+1, right.ptrKey(0))
		}
	}
	if mid.nritems() == 1 {
		if err := t.refillSingle(tx, mid, left, level); err != nil {
			return err
		}
	}
	if mid.nritems() == 0 {
		p.unlock(level)
		t.delPtr(p, level+1, pslot)
		tx.free(t, mid)
		tx.stats.Merges.Add(1)
		t.stats.Merges.Add(1)
	} else {
		parent.setPtrKey(pslot, mid.ptrKey(0))
	}
	// The path follows the original child, which may now be in left.
	if left != nil && left.nritems() > orig {
		p.unlock(level)
		p.set(level, left, writeLocked)
		p.slots[level+1]--
		p.slots[level] = orig
		left = nil // now the path's; not unlocked on return
	} else if left != nil {
		p.slots[level] = orig - left.nritems()
	}
	if got := p.nodes[level].ptrAddr(p.slots[level]); got != origPtr {
		panic(fmt.Sprintf("ctree: balance_level lost the path: slot points at %d, want %d", got, origPtr))
	}
	return nil
}

// refillSingle handles a node left with one pointer, which a delete below
// could empty: refill it from its left sibling, or move the pointer there.
func (t *Tree) refillSingle(tx *Trans, mid, left *block, level int) error {
	if left == nil {
		return t.errNodeCorrupt(mid, "node with one pointer and no left sibling at level %d", level)
	}
	if !t.balanceNodeRight(tx, mid, left) {
		if _, err := t.pushNodeLeft(tx, left, mid, true); err != nil {
			return err
		}
	}
	if mid.nritems() == 1 {
		panic(fmt.Sprintf("ctree: balance_level left node %d with one pointer", mid.addr))
	}
	return nil
}

// collapseRoot replaces a root node that has one pointer by its only child
// (the root case of balance_level). The child is made private first, so
// the new root is never a committed block.
func (t *Tree) collapseRoot(tx *Trans, p *Path, level int) error {
	mid := p.nodes[level]
	if mid.nritems() != 1 {
		return nil
	}
	child, err := t.readChild(tx, mid, 0)
	if err != nil {
		return err
	}
	child.lockW()
	cowed, err := t.cowIfNeeded(tx, child, mid, 0)
	if err != nil {
		child.mu.Unlock()
		return err
	}
	t.root.Store(cowed)
	cowed.mu.Unlock()
	p.drop(level)
	tx.free(t, mid)
	tx.stats.RootShrinks.Add(1)
	t.stats.RootShrinks.Add(1)
	return nil
}
