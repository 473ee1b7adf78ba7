package ctree

import (
	"errors"
	"fmt"
	"math"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrOverflow is returned when an item would not fit in a leaf of its own.
var ErrOverflow = errors.New("ctree: item does not fit in a leaf")

// splitLeaf makes room for dataSize bytes in the path's leaf at the path's
// slot (split_leaf, ctree-algorithms.md section 5): first by pushing items
// to the right and then to the left sibling, then by splitting the leaf,
// twice if the new item still does not fit. extend is true when the key
// exists and its item will grow. On return the path's leaf has dataSize
// free bytes and the slot is where the item goes.
// Preconditions: the leaf and its parent are write-locked and private.
func (t *Tree) splitLeaf(tx *Trans, p *Path, insKey disk.Key, dataSize int, extend bool) error {
	tx.stats.SplitLeaf.Add(1)
	t.stats.SplitLeaf.Add(1)
	lds := tx.lds()
	l := p.nodes[0]
	slot := p.slots[0]
	if extend && dataSize+l.itemSize(slot)+ih > lds {
		return ErrOverflow
	}
	if dataSize > 0 && p.nodes[1] != nil {
		done, err := t.pushBeforeSplit(tx, p, dataSize)
		if done || err != nil {
			return err
		}
	}
	if p.nodes[1] == nil {
		if err := t.insertNewRoot(tx, p, 1); err != nil {
			return err
		}
	}
	tried, doubled := false, false
	for {
		l = p.nodes[0]
		slot = p.slots[0]
		n := l.nritems()
		mid, split, pushDouble := t.splitPoint(tx, l, slot, n, dataSize, extend, tried)
		if pushDouble {
			tried = true
			if err := t.pushForDoubleSplit(tx, p, dataSize); err != nil {
				return err
			}
			if p.nodes[0].freeSpace() >= dataSize {
				return nil
			}
			continue
		}
		sep := insKey
		if split != 0 {
			sep = l.itemKey(mid)
		}
		right, err := tx.newBlock(t, 0, l.addr)
		if err != nil {
			return err
		}
		tx.stats.LeafSplits.Add(1)
		t.stats.LeafSplits.Add(1)
		if split == 0 {
			t.splitToEmpty(p, right, sep, mid <= slot)
			return nil
		}
		t.copyForSplit(tx, p, l, right, slot, mid, n)
		if split == 2 {
			if doubled {
				panic("ctree: split_leaf wants a third leaf")
			}
			doubled = true
			tx.stats.DoubleSplits.Add(1)
			t.stats.DoubleSplits.Add(1)
			continue
		}
		return nil
	}
}

// pushBeforeSplit is split_leaf's first step: try to make room by pushing
// items right, then left. The right push is charged the shortfall only
// when the new item stays in this leaf (slot < nritems); the left push is
// charged it when slot > 0 (the new item does not go left whole).
func (t *Tree) pushBeforeSplit(tx *Trans, p *Path, dataSize int) (done bool, err error) {
	l := p.nodes[0]
	slot := p.slots[0]
	need := dataSize
	if slot < l.nritems() {
		need -= l.freeSpace()
	}
	atEnd := slot == l.nritems()
	tx.stats.PushLeafRight.Add(1)
	t.stats.PushLeafRight.Add(1)
	moved, err := t.pushLeafRight(tx, p, need, need, false, 0)
	if err != nil {
		return false, err
	}
	if atEnd {
		// The first condition of the seed shortcut holds; count why it
		// was then taken or not.
		tx.stats.PushLeafRightAtEnd.Add(1)
		t.stats.PushLeafRightAtEnd.Add(1)
		switch p.pushed {
		case pushNoSibling:
			tx.stats.PushLeafRightAtEndNoSibling.Add(1)
			t.stats.PushLeafRightAtEndNoSibling.Add(1)
		case pushNoRoom:
			tx.stats.PushLeafRightAtEndNoRoom.Add(1)
			t.stats.PushLeafRightAtEndNoRoom.Add(1)
		}
	}
	if !moved {
		need = dataSize
		if slot > 0 {
			need -= l.freeSpace()
		}
		tx.stats.PushLeafLeft.Add(1)
		t.stats.PushLeafLeft.Add(1)
		if _, err := t.pushLeafLeft(tx, p, need, need, false, math.MaxInt); err != nil {
			return false, err
		}
	}
	return p.nodes[0].freeSpace() >= dataSize, nil
}

// splitPoint chooses where to split leaf l of n items for dataSize bytes
// at slot: mid is the first item of the new right leaf; split is 1 for an
// ordinary split, 0 for a new empty leaf holding only the new item, 2 for
// a split at the slot followed by a second split; pushDouble asks to try
// push_for_double_split first.
func (t *Tree) splitPoint(tx *Trans, l *block, slot, n, dataSize int, extend, tried bool) (mid, split int, pushDouble bool) {
	lds := tx.lds()
	mid = (n + 1) / 2
	split = 1
	// atSlot splits exactly at the insertion point; if the new item still
	// does not fit with the items after it, that is a double split.
	atSlot := func() {
		mid = slot
		if mid != n && l.spaceUsed(mid, n-mid)+dataSize > lds {
			if dataSize > 0 && !tried {
				pushDouble = true
			} else {
				split = 2
			}
		}
	}
	if mid <= slot {
		// The insertion point is in the right half.
		if n == 1 || l.spaceUsed(mid, n-mid)+dataSize > lds {
			if slot >= n {
				split = 0
			} else {
				atSlot()
			}
		}
		return mid, split, pushDouble
	}
	// The insertion point is in the left half.
	if l.spaceUsed(0, mid)+dataSize > lds {
		switch {
		case !extend && dataSize > 0 && slot == 0:
			split = 0
		case (extend || dataSize == 0) && slot == 0:
			mid = 1 // isolate item 0, the one being grown
		default:
			atSlot()
		}
	}
	return mid, split, pushDouble
}

// splitToEmpty links the new empty leaf right next to the path's leaf,
// after it (toRight) or before it, with separator sep (the key about to be
// inserted), and moves the path to its slot 0. The leaf is not left empty:
// the caller inserts at once.
func (t *Tree) splitToEmpty(p *Path, right *block, sep disk.Key, toRight bool) {
	if toRight {
		t.insertPtr(p, 1, sep, right, p.slots[1]+1)
		p.unlock(0)
		p.set(0, right, writeLocked)
		p.slots[0] = 0
		p.slots[1]++
		return
	}
	t.insertPtr(p, 1, sep, right, p.slots[1])
	p.unlock(0)
	p.set(0, right, writeLocked)
	p.slots[0] = 0
	if p.slots[1] == 0 {
		t.fixupLowKeys(p, sep, 1)
	}
}

// copyForSplit moves items [mid, n) of l into the new leaf right, links
// right after l in the parent, and moves the path to right if the slot
// went there (copy_for_split).
func (t *Tree) copyForSplit(tx *Trans, p *Path, l, right *block, slot, mid, n int) {
	lds := tx.lds()
	nr := n - mid
	dataLen := l.itemEnd(mid) - l.dataEnd()
	right.copyItemsFrom(l, 0, mid, nr)
	right.copyDataFrom(l, lds-dataLen, l.dataEnd(), dataLen)
	shift := lds - l.itemEnd(mid)
	for i := 0; i < nr; i++ {
		right.setItemOffset(i, right.itemOffset(i)+shift)
	}
	right.setNritems(nr)
	l.setNritems(mid)
	t.insertPtr(p, 1, right.itemKey(0), right, p.slots[1]+1)
	if mid <= slot {
		p.unlock(0)
		p.set(0, right, writeLocked)
		p.slots[0] -= mid
		p.slots[1]++
	} else {
		right.mu.Unlock()
	}
}

// pushForDoubleSplit tries to bring the insertion point to an edge of its
// leaf, or free enough room, by pushing the items from the slot on to the
// right and the items before it to the left (push_for_double_split).
func (t *Tree) pushForDoubleSplit(tx *Trans, p *Path, dataSize int) error {
	tx.stats.PushForDoubleSplit.Add(1)
	t.stats.PushForDoubleSplit.Add(1)
	l := p.nodes[0]
	slot := p.slots[0]
	need := dataSize
	if slot < l.nritems() {
		need -= l.freeSpace()
	}
	if _, err := t.pushLeafRight(tx, p, 1, need, false, slot); err != nil {
		return err
	}
	l = p.nodes[0]
	slot = p.slots[0]
	if slot == 0 || slot == l.nritems() || l.freeSpace() >= dataSize {
		return nil
	}
	need = dataSize
	if slot > 0 {
		need -= l.freeSpace()
	}
	_, err := t.pushLeafLeft(tx, p, 1, need, false, slot)
	return err
}

// insertNewRoot puts a new root at level above the current one, with one
// pointer to it (insert_new_root). The old root must be private.
func (t *Tree) insertNewRoot(tx *Trans, p *Path, level int) error {
	lower := p.nodes[level-1]
	if t.root.Load() != lower || lower.generation() != tx.gen {
		panic(fmt.Sprintf("ctree: new root above block %d, which is not the private root", lower.addr))
	}
	c, err := tx.newBlock(t, level, lower.addr)
	if err != nil {
		return err
	}
	c.setPtr(0, lower.firstKey(), lower.addr, lower.generation())
	c.setNritems(1)
	t.root.Store(c)
	p.set(level, c, writeLocked)
	p.slots[level] = 0
	tx.stats.RootGrows.Add(1)
	t.stats.RootGrows.Add(1)
	return nil
}

// insertPtr inserts a pointer to child with key at slot of the node at
// level (insert_ptr). The node must be write-locked with room for it (the
// pre-split on the way down guarantees room). A change at slot 0 is not
// propagated: callers do that.
func (t *Tree) insertPtr(p *Path, level int, key disk.Key, child *block, slot int) {
	b := p.nodes[level]
	n := b.nritems()
	if p.locks[level] != writeLocked || n >= disk.MaxKeyPtrs(len(b.buf)) || slot > n {
		panic(fmt.Sprintf("ctree: insert_ptr at level %d slot %d of %d (lock %d)", level, slot, n, p.locks[level]))
	}
	if slot < n {
		b.movePtrs(slot+1, slot, n-slot)
	}
	b.setPtr(slot, key, child.addr, child.generation())
	b.setNritems(n + 1)
}
