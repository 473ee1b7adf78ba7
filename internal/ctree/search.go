package ctree

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Search walks from the root to the leaf where key is or would be, and
// leaves p there (btrfs_search_slot, ctree-algorithms.md section 3).
//
//   - insLen > 0: an insertion of insLen leaf bytes (data plus one item
//     header per new item) follows. Full nodes are split on the way down and
//     the leaf is given insLen free bytes, pushing items to its siblings or
//     splitting it.
//   - insLen < 0: a deletion follows. Underfull nodes are balanced or merged
//     on the way down.
//   - insLen == 0: a lookup, or with cow an in-place update.
//   - cow: every block on the path is made private to tx (copied if it is
//     not) before anything else happens at its level. Required whenever
//     the tree will change; cow false with insLen != 0 is a bug.
//
// found reports an exact match at p.Slot(). On error p is released.
func (t *Tree) Search(tx *Trans, p *Path, key disk.Key, insLen int, cow bool) (found bool, err error) {
	if !cow && insLen != 0 {
		panic("ctree: Search with insLen != 0 needs cow")
	}
	tx.stats.Searches.Add(1)
	t.stats.Searches.Add(1)
	lowestUnlock := 1
	if insLen < 0 {
		lowestUnlock = 2
	}
	// Levels at or below wll are write-locked, higher ones read-locked.
	wll := 0
	switch {
	case !cow:
		wll = -1
	case p.KeepLocks || p.LowestLevel > 0:
		wll = disk.MaxLevel
	case insLen > 0:
		wll = 1 // the leaf and its parent: key updates and pointer inserts
	case insLen < 0:
		wll = 2 // deleting a leaf removes a pointer from level 1, balanced against level 2
	}
	minWll := wll
	for {
		found, restart, err := t.descend(tx, p, key, insLen, cow, lowestUnlock, minWll, &wll)
		if err != nil {
			p.Release()
			return false, err
		}
		if !restart {
			return found, nil
		}
		tx.stats.SearchRestarts.Add(1)
		t.stats.SearchRestarts.Add(1)
	}
}

// descend is one attempt of Search. It returns restart (with p released)
// when a level it must change is not write-locked: *wll is raised and the
// caller starts again from the root. Locks are never upgraded in place.
func (t *Tree) descend(tx *Trans, p *Path, key disk.Key, insLen int, cow bool,
	lowestUnlock, minWll int, wll *int) (found, restart bool, err error) {
	b, lk := t.lockRoot(*wll)
	p.set(b.level(), b, lk)
	prevCmp := -1
	for {
		level := b.level()
		if cow && !tx.private(b) {
			parent := p.parent(level)
			if level > *wll || (parent != nil && level+1 > *wll) {
				*wll = level + 1
				p.Release()
				return false, true, nil
			}
			pslot := 0
			if parent != nil {
				pslot = p.slots[level+1]
			}
			nb, err := t.cowBlock(tx, b, parent, pslot)
			if err != nil {
				return false, false, err // b is still locked in p
			}
			b = nb
			p.set(level, b, writeLocked)
		}
		if insLen == 0 && !p.KeepLocks {
			// Lookups and in-place updates change no key: the parent is
			// not needed any more, even at slot 0.
			p.unlock(level + 1)
		}
		if level == 0 {
			found, err := t.searchLeaf(tx, p, key, insLen, prevCmp)
			if err != nil {
				return false, false, err
			}
			if !p.SearchForSplit {
				p.unlockUp(0, lowestUnlock, minWll, nil)
			}
			return found, false, nil
		}
		slot, found, dec := nodeSlot(b, key, &prevCmp)
		p.slots[level] = slot
		restart, err := t.setupNodesForSearch(tx, p, level, insLen, wll)
		if restart || err != nil {
			return false, restart, err
		}
		b = p.nodes[level]
		slot = p.slots[level]
		// A change at slot 0 may change this block's first key, which
		// must then be written into the parent (I2).
		if slot == 0 && insLen != 0 && *wll < level+1 {
			*wll = level + 1
			p.Release()
			return false, true, nil
		}
		p.unlockUp(level, lowestUnlock, minWll, wll)
		if level == p.LowestLevel {
			if dec {
				p.slots[level]++
			}
			return found, false, nil
		}
		child, err := t.readChild(tx, b, slot)
		if err != nil {
			return false, false, err
		}
		if level-1 <= *wll {
			child.lockW()
			p.set(level-1, child, writeLocked)
		} else {
			child.mu.RLock()
			p.set(level-1, child, readLocked)
		}
		b = child
	}
}

// nodeSlot finds the child of node b to follow for key: the last slot whose
// key is <= key, or 0 (dec tells that the insertion point was decremented).
// Below an exact match (*prevCmp == 0) the key is the first key of every
// block (I2), so the search is skipped.
func nodeSlot(b *block, key disk.Key, prevCmp *int) (slot int, found, dec bool) {
	if *prevCmp == 0 {
		return 0, true, false
	}
	slot, found = b.search(key, 0)
	*prevCmp = 1
	if found {
		*prevCmp = 0
	}
	if !found && slot > 0 {
		return slot - 1, false, true
	}
	return slot, found, false
}

// setupNodesForSearch does the pre-emptive node maintenance of a modifying
// descent: split a node that could not absorb the pointers a split below
// adds, balance a node that a delete below could empty.
func (t *Tree) setupNodesForSearch(tx *Trans, p *Path, level, insLen int, wll *int) (restart bool, err error) {
	b := p.nodes[level]
	n := b.nritems()
	np := tx.np()
	switch {
	case (insLen > 0 || p.SearchForSplit) && n >= np-3:
		if *wll < level+1 {
			*wll = level + 1
			p.Release()
			return true, nil
		}
		return false, t.splitNode(tx, p, level)
	case insLen < 0 && n < np/2:
		if *wll < level+1 {
			*wll = level + 1
			p.Release()
			return true, nil
		}
		if err := t.balanceLevel(tx, p, level); err != nil {
			return false, err
		}
		if p.nodes[level] == nil {
			// The node was freed (root collapse): start again.
			p.Release()
			return true, nil
		}
	}
	return false, nil
}

// searchLeaf is the leaf step of Search (search_leaf): find the slot, and
// for an insertion make room, splitting if needed. For an insertion into a
// leaf that has room and whose first key is below the new key, the upper
// levels are unlocked before the binary search (they cannot change).
func (t *Tree) searchLeaf(tx *Trans, p *Path, key disk.Key, insLen, prevCmp int) (bool, error) {
	leaf := p.nodes[0]
	free := -1
	low := 0
	found := false
	searched := false
	if insLen > 0 {
		free = leaf.freeSpace()
		if p.locks[1] != unlocked && free >= insLen && leaf.nritems() > 0 {
			switch c := leaf.itemKey(0).Compare(key); {
			case c < 0:
				p.unlockUpSafe(1)
				low = 1
			case c == 0:
				p.unlockUpSafe(1)
				p.slots[0], found, searched = 0, true, true
			default:
				// The new key goes to slot 0: the parents stay locked
				// for the key fix-up.
				p.slots[0], found, searched = 0, false, true
			}
		}
	}
	if !searched {
		if prevCmp == 0 {
			p.slots[0], found = 0, true
		} else {
			p.slots[0], found = leaf.search(key, low)
		}
	}
	if insLen > 0 {
		if found && !p.SearchForExtension {
			// A colliding insert grows the existing item: no new header.
			insLen -= ih
		}
		if !found && p.SearchForExtension {
			// Nothing to extend. The kernel's callers never get here; not
			// splitting keeps a split from leaving an empty leaf behind.
			return false, nil
		}
		if free < insLen {
			if err := t.splitLeaf(tx, p, key, insLen, found); err != nil {
				return false, err
			}
		}
	}
	return found, nil
}
