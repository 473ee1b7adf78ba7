package ctree

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Internal node maintenance (ctree-algorithms.md section 6).

// minNodePtrs is how many pointers a node keeps when it pushes to a sibling
// without being emptied.
const minNodePtrs = 8

// splitNode makes room in the node at level for the pointers a split below
// may add (split_node): a root grows a new root above it; another node
// first tries to push pointers to its siblings, and splits in half if that
// leaves it with NP-3 pointers or more.
func (t *Tree) splitNode(tx *Trans, p *Path, level int) error {
	c := p.nodes[level]
	if p.parent(level) == nil {
		if err := t.insertNewRoot(tx, p, level+1); err != nil {
			return err
		}
	} else {
		moved, err := t.pushNodesForInsert(tx, p, level)
		if err != nil {
			return err
		}
		c = p.nodes[level]
		if moved && c.nritems() < tx.np()-3 {
			return nil
		}
	}
	n := c.nritems()
	mid := (n + 1) / 2
	split, err := tx.newBlock(t, level, c.addr)
	if err != nil {
		return err
	}
	split.copyPtrsFrom(c, 0, mid, n-mid)
	split.setNritems(n - mid)
	c.setNritems(mid)
	t.insertPtr(p, level+1, split.ptrKey(0), split, p.slots[level+1]+1)
	tx.stats.NodeSplits.Add(1)
	t.stats.NodeSplits.Add(1)
	if p.slots[level] >= mid {
		p.slots[level] -= mid
		p.unlock(level)
		p.set(level, split, writeLocked)
		p.slots[level+1]++
	} else {
		split.mu.Unlock()
	}
	return nil
}

// lockSibling reads, write-locks and makes private the child of parent at
// slot. The caller must hold parent's write lock.
func (t *Tree) lockSibling(tx *Trans, parent *block, slot int) (*block, error) {
	b, err := t.readChild(tx, parent, slot)
	if err != nil {
		return nil, err
	}
	b.lockW()
	nb, err := t.cowIfNeeded(tx, b, parent, slot)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	return nb, nil
}

// pushNodesForInsert tries to make room in the node at level by pushing
// pointers into its left, then its right sibling (push_nodes_for_insert).
// The path follows its slot.
func (t *Tree) pushNodesForInsert(tx *Trans, p *Path, level int) (bool, error) {
	mid := p.nodes[level]
	parent := p.parent(level)
	pslot := p.slots[level+1]
	orig := p.slots[level]
	np := tx.np()
	if pslot > 0 {
		left, err := t.readChild(tx, parent, pslot-1)
		if err != nil {
			return false, err
		}
		left.lockW()
		leftN := left.nritems()
		moved := false
		if leftN < np-1 {
			// A failed COW means "cannot push"; left is then still the
			// locked original.
			if cowed, cerr := t.cowIfNeeded(tx, left, parent, pslot-1); cerr == nil {
				left = cowed
				if moved, err = t.pushNodeLeft(tx, left, mid, false); err != nil {
					left.mu.Unlock()
					return false, err
				}
			}
		}
		if moved {
			tx.stats.NodePushes.Add(1)
			t.stats.NodePushes.Add(1)
			orig += leftN
			parent.setPtrKey(pslot, mid.ptrKey(0))
			if left.nritems() > orig {
				p.unlock(level)
				p.set(level, left, writeLocked)
				p.slots[level+1]--
				p.slots[level] = orig
			} else {
				p.slots[level] = orig - left.nritems()
				left.mu.Unlock()
			}
			return true, nil
		}
		left.mu.Unlock()
	}
	if pslot+1 < parent.nritems() {
		right, err := t.readChild(tx, parent, pslot+1)
		if err != nil {
			return false, err
		}
		right.lockW()
		moved := false
		if right.nritems() < np-1 {
			cowed, err := t.cowIfNeeded(tx, right, parent, pslot+1)
			if err == nil {
				right = cowed
				moved = t.balanceNodeRight(tx, right, mid)
			}
		}
		if moved {
			tx.stats.NodePushes.Add(1)
			t.stats.NodePushes.Add(1)
			parent.setPtrKey(pslot+1, right.ptrKey(0))
			if mid.nritems() <= orig {
				p.slots[level] = orig - mid.nritems()
				p.unlock(level)
				p.set(level, right, writeLocked)
				p.slots[level+1]++
			} else {
				right.mu.Unlock()
			}
			return true, nil
		}
		right.mu.Unlock()
	}
	return false, nil
}

// pushNodeLeft moves pointers from the start of src to the end of dst
// (push_node_left). Without empty, src keeps at least minNodePtrs; with
// empty, src is emptied if dst has room, else it keeps minNodePtrs. The
// caller fixes src's key in the parent.
func (t *Tree) pushNodeLeft(tx *Trans, dst, src *block, empty bool) (bool, error) {
	srcN := src.nritems()
	dstN := dst.nritems()
	push := tx.np() - dstN
	if !empty && srcN <= minNodePtrs {
		return false, nil
	}
	if push <= 0 {
		return false, nil
	}
	if empty {
		push = min(srcN, push)
		if push < srcN && srcN-push < minNodePtrs {
			if push <= minNodePtrs {
				return false, nil
			}
			push -= minNodePtrs
		}
	} else {
		push = min(srcN-minNodePtrs, push)
	}
	if err := t.checkSiblingKeys(dst, src); err != nil {
		return false, err
	}
	dst.copyPtrsFrom(src, dstN, 0, push)
	if push < srcN {
		src.movePtrs(0, push, srcN-push)
	}
	src.setNritems(srcN - push)
	dst.setNritems(dstN + push)
	return true, nil
}

// balanceNodeRight moves up to half of src's pointers from its end to the
// start of dst, its right sibling (balance_node_right); src is never
// emptied. The caller fixes dst's key in the parent.
func (t *Tree) balanceNodeRight(tx *Trans, dst, src *block) bool {
	srcN := src.nritems()
	dstN := dst.nritems()
	push := tx.np() - dstN
	if push <= 0 || srcN < 4 {
		return false
	}
	maxPush := srcN/2 + 1
	if maxPush >= srcN {
		return false
	}
	push = min(push, maxPush)
	if t.checkSiblingKeys(src, dst) != nil {
		return false // reported by Verify; refusing to move is safe
	}
	dst.movePtrs(push, 0, dstN)
	dst.copyPtrsFrom(src, 0, srcN-push, push)
	src.setNritems(srcN - push)
	dst.setNritems(dstN + push)
	return true
}

// delPtr removes pointer slot from the node at level (del_ptr). An emptied
// root node becomes an empty root leaf; a change of slot 0 is propagated.
func (t *Tree) delPtr(p *Path, level, slot int) {
	b := p.nodes[level]
	n := b.nritems()
	if p.locks[level] != writeLocked {
		panic(fmt.Sprintf("ctree: del_ptr at level %d without a write lock", level))
	}
	if slot != n-1 {
		b.movePtrs(slot, slot+1, n-slot-1)
	}
	n--
	b.setNritems(n)
	switch {
	case n == 0 && p.parent(level) == nil:
		if level != 1 {
			panic(fmt.Sprintf("ctree: root at level %d emptied", level))
		}
		b.edit()
		b.buf[offLevel] = 0 // the tree is now one empty leaf
	case slot == 0 && n > 0:
		t.fixupLowKeys(p, b.ptrKey(0), level+1)
	}
}

// delLeaf unlinks the path's emptied leaf from its parent and frees it
// (btrfs_del_leaf). The path's slot at level 1 must name the leaf.
func (t *Tree) delLeaf(tx *Trans, p *Path, leaf *block) {
	t.delPtr(p, 1, p.slots[1])
	if p.nodes[1].nritems() == 0 && p.nodes[1].level() == 0 {
		tx.stats.RootShrinks.Add(1)
		t.stats.RootShrinks.Add(1)
	}
	p.unlockUpSafe(1)
	tx.free(t, leaf)
}

// errNodeCorrupt reports a structural problem found while balancing.
func (t *Tree) errNodeCorrupt(b *block, format string, args ...any) error {
	return &disk.CorruptError{Logical: b.addr, Tree: t.owner, What: fmt.Sprintf(format, args...)}
}
