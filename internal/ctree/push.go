package ctree

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Leaf pushes: moving items between a leaf and a sibling under the same
// parent (ctree-algorithms.md section 4). Each returns moved == true when
// items moved (the path may now point into the sibling), false when nothing
// could move (the sibling is released).

// pushOutcome says how the last pushLeafRight on a path ended; split_leaf
// counts the reasons the seed patch's shortcut was not taken.
type pushOutcome uint8

const (
	pushNoSibling pushOutcome = iota + 1 // the leaf is its parent's last child
	pushNoRoom                           // the right sibling lacked dataSize free bytes
	pushEmptyLeaf                        // nothing to push
	pushShortcut                         // the seed patch's shortcut
	pushNone                             // the count found nothing that fits
	pushMoved                            // items moved
)

// checkSiblingKeys verifies that the last key of left sorts before the
// first key of right (I1) before items move between them.
func (t *Tree) checkSiblingKeys(left, right *block) error {
	if left.nritems() == 0 || right.nritems() == 0 {
		return nil
	}
	lk := left.key(left.nritems() - 1)
	rk := right.key(0)
	if !lk.Less(rk) {
		return &disk.CorruptError{Logical: left.addr, Tree: t.owner, Key: &lk,
			What: fmt.Sprintf("sibling key order: last key of block %d not below first key %v of block %d",
				left.addr, rk, right.addr)}
	}
	return nil
}

// pushLeafRight tries to move items from the end of the path's leaf to the
// start of its right sibling (push_leaf_right). dataSize is the admission
// threshold: the sibling must have that much free space before it is
// copied. minDataSize is what the pending new item costs in the count.
// empty asks to move everything (delete). Items below minSlot never move.
func (t *Tree) pushLeafRight(tx *Trans, p *Path, minDataSize, dataSize int, empty bool, minSlot int) (bool, error) {
	left := p.nodes[0]
	upper := p.nodes[1]
	p.pushed = pushNoSibling
	if upper == nil {
		return false, nil
	}
	slot := p.slots[1]
	if slot >= upper.nritems()-1 {
		return false, nil // the last child: btrfs never pushes across parents
	}
	if p.locks[1] != writeLocked {
		panic("ctree: push_leaf_right without the parent write-locked")
	}
	right, err := t.readChild(tx, upper, slot+1)
	if err != nil {
		return false, err
	}
	right.lockW()
	// The sibling's free space is read only under its lock.
	free := right.freeSpace()
	if free < dataSize {
		right.mu.Unlock()
		p.pushed = pushNoRoom
		return false, nil
	}
	cowed, err := t.cowIfNeeded(tx, right, upper, slot+1)
	if err != nil {
		right.mu.Unlock()
		return false, err
	}
	right = cowed
	leftN := left.nritems()
	if leftN == 0 {
		right.mu.Unlock()
		p.pushed = pushEmptyLeaf
		return false, nil
	}
	if err := t.checkSiblingKeys(left, right); err != nil {
		right.mu.Unlock()
		return false, err
	}
	if !t.opts.NoPushRightShortcut && p.slots[0] == leftN && !empty {
		// The seed patch: the new key sorts after every key of the left
		// leaf and before the right leaf's first key, and the right leaf
		// has room for it. Insert it at slot 0 of the right leaf and leave
		// the left leaf untouched.
		tx.stats.PushLeafRightShortcut.Add(1)
		t.stats.PushLeafRightShortcut.Add(1)
		p.pushed = pushShortcut
		p.unlock(0)
		p.set(0, right, writeLocked)
		p.slots[0] = 0
		p.slots[1]++
		return true, nil
	}
	moved := t.pushLeafRightItems(tx, p, minDataSize, empty, right, free, minSlot)
	p.pushed = pushNone
	if moved {
		p.pushed = pushMoved
	}
	return moved, nil
}

// pushLeafRightItems decides how many items move right and moves them
// (__push_leaf_right). right is write-locked and private; it is released or
// becomes the path's leaf.
func (t *Tree) pushLeafRightItems(tx *Trans, p *Path, dataSize int, empty bool, right *block, free, minSlot int) bool {
	left := p.nodes[0]
	upper := p.nodes[1]
	n := left.nritems()
	s := p.slots[0]
	nr := 0
	if !empty {
		nr = max(1, minSlot) // item 0 stays: left keeps its first key
	}
	pushSpace := 0
	if s >= n {
		pushSpace = dataSize // the new item follows the moved ones right
	}
	pushItems := 0
	for i := n - 1; i >= nr; i-- {
		if !empty && pushItems > 0 {
			if s > i {
				break // never move items before the insertion point
			}
			if s == i && left.freeSpace()+2*pushSpace > free {
				break // keep the insertion point left unless right stays roomier
			}
		}
		if s == i {
			pushSpace += dataSize
		}
		size := left.itemSize(i)
		if size+ih+pushSpace > free {
			break
		}
		pushItems++
		pushSpace += size + ih
	}
	if pushItems == 0 {
		right.mu.Unlock()
		return false
	}

	// Move the data block of items [n-pushItems, n) to the end of right's
	// data area, below nothing: right's own data shifts down first.
	first := n - pushItems
	dataLen := left.itemEnd(first) - left.dataEnd()
	rightN := right.nritems()
	rEnd := right.dataEnd()
	lds := tx.lds()
	right.moveData(rEnd-dataLen, rEnd, lds-rEnd)
	right.copyDataFrom(left, lds-dataLen, left.dataEnd(), dataLen)
	right.moveItems(pushItems, 0, rightN)
	right.copyItemsFrom(left, 0, first, pushItems)
	right.setNritems(rightN + pushItems)
	right.recomputeOffsets()
	left.setNritems(n - pushItems)
	tx.stats.ItemsMoved.Add(int64(pushItems))
	t.stats.ItemsMoved.Add(int64(pushItems))
	tx.stats.BytesMoved.Add(int64(dataLen + pushItems*ih))
	t.stats.BytesMoved.Add(int64(dataLen + pushItems*ih))

	upper.setPtrKey(p.slots[1]+1, right.itemKey(0)) // slot >= 1: no further fix-up
	if p.slots[0] >= left.nritems() {
		// The insertion point moved to right.
		p.slots[0] -= left.nritems()
		p.unlock(0)
		p.set(0, right, writeLocked)
		p.slots[1]++
	} else {
		right.mu.Unlock()
	}
	return true
}

// pushLeafLeft tries to move items from the start of the path's leaf to
// the end of its left sibling (push_leaf_left), the mirror of
// pushLeafRight. Items at maxSlot and above never move.
func (t *Tree) pushLeafLeft(tx *Trans, p *Path, minDataSize, dataSize int, empty bool, maxSlot int) (bool, error) {
	right := p.nodes[0]
	upper := p.nodes[1]
	rightN := right.nritems()
	if rightN == 0 || upper == nil {
		return false, nil
	}
	slot := p.slots[1]
	if slot == 0 {
		return false, nil
	}
	if p.locks[1] != writeLocked {
		panic("ctree: push_leaf_left without the parent write-locked")
	}
	left, err := t.readChild(tx, upper, slot-1)
	if err != nil {
		return false, err
	}
	left.lockW()
	free := left.freeSpace()
	if free < dataSize {
		left.mu.Unlock()
		return false, nil
	}
	cowed, err := t.cowIfNeeded(tx, left, upper, slot-1)
	if err != nil {
		// The kernel treats a failed COW here as "cannot push".
		left.mu.Unlock()
		return false, nil
	}
	left = cowed
	if err := t.checkSiblingKeys(left, right); err != nil {
		left.mu.Unlock()
		return false, err
	}
	return t.pushLeafLeftItems(tx, p, minDataSize, empty, left, free, maxSlot), nil
}

// pushLeafLeftItems is __push_leaf_left. left is write-locked and private;
// it is released or becomes the path's leaf.
func (t *Tree) pushLeafLeftItems(tx *Trans, p *Path, dataSize int, empty bool, left *block, free, maxSlot int) bool {
	right := p.nodes[0]
	rightN := right.nritems()
	s := p.slots[0]
	nr := min(rightN-1, maxSlot) // the last item stays: right stays non-empty
	if empty {
		nr = min(rightN, maxSlot)
	}
	pushSpace, pushItems := 0, 0
	for i := 0; i < nr; i++ {
		if !empty && pushItems > 0 {
			if s < i {
				break
			}
			if s == i && right.freeSpace()+2*pushSpace > free {
				break
			}
		}
		if s == i {
			pushSpace += dataSize
		}
		size := right.itemSize(i)
		if size+ih+pushSpace > free {
			break
		}
		pushItems++
		pushSpace += size + ih
	}
	if pushItems == 0 {
		left.mu.Unlock()
		return false
	}
	if left.nritems() == 0 {
		panic(fmt.Sprintf("ctree: push_leaf_left into empty leaf %d", left.addr))
	}

	lds := tx.lds()
	oldLeftN := left.nritems()
	leftEnd := left.dataEnd()
	// Items [0, pushItems) of right: headers appended to left, data copied
	// just below left's data; then their offsets are rebased.
	dataLen := lds - right.itemOffset(pushItems-1)
	left.copyItemsFrom(right, oldLeftN, 0, pushItems)
	left.copyDataFrom(right, leftEnd-dataLen, right.itemOffset(pushItems-1), dataLen)
	shift := lds - leftEnd
	for i := oldLeftN; i < oldLeftN+pushItems; i++ {
		left.setItemOffset(i, left.itemOffset(i)-shift)
	}
	left.setNritems(oldLeftN + pushItems)

	// Close the gap in right: remaining data up to the end, headers down.
	if pushItems < rightN {
		rEnd := right.dataEnd()
		rest := right.itemOffset(pushItems-1) - rEnd
		right.moveData(lds-rest, rEnd, rest)
		right.moveItems(0, pushItems, rightN-pushItems)
	}
	right.setNritems(rightN - pushItems)
	right.recomputeOffsets()
	tx.stats.ItemsMoved.Add(int64(pushItems))
	t.stats.ItemsMoved.Add(int64(pushItems))
	tx.stats.BytesMoved.Add(int64(dataLen + pushItems*ih))
	t.stats.BytesMoved.Add(int64(dataLen + pushItems*ih))

	if right.nritems() > 0 {
		// Right's first key changed; its parent slot is >= 1, so the
		// fix-up stops at the parent. An emptied leaf is deleted next.
		t.fixupLowKeys(p, right.itemKey(0), 1)
	}
	if p.slots[0] < pushItems {
		p.slots[0] += oldLeftN
		p.unlock(0)
		p.set(0, left, writeLocked)
		p.slots[1]--
	} else {
		left.mu.Unlock()
		p.slots[0] -= pushItems
	}
	return true
}

// fixupLowKeys writes key into the slot the path followed at level and
// upward while that slot is 0 (fixup_low_keys): a block's first key
// changed and its parents' keys must follow (I2). Every level written must
// be write-locked.
func (t *Tree) fixupLowKeys(p *Path, key disk.Key, level int) {
	for i := level; i < disk.MaxLevel; i++ {
		b := p.nodes[i]
		if b == nil {
			break
		}
		if p.locks[i] != writeLocked {
			panic(fmt.Sprintf("ctree: key fix-up at level %d without a write lock", i))
		}
		b.setPtrKey(p.slots[i], key)
		if p.slots[i] != 0 {
			break
		}
	}
}
