package ctree

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// lockState is what a Path holds on the block at one level.
type lockState uint8

const (
	unlocked lockState = iota
	readLocked
	writeLocked
)

// Path is the kernel's btrfs_path: for each level from the leaf (0) up to
// the root, the block the last search went through, the slot in it and the
// lock held on it. At node levels the slot is the child followed; in the
// leaf it is the item found, or where the key would be inserted (which can
// be one past the last item). A Path is used by one goroutine; Release it
// before reusing it or when done, or the locks it holds stay held.
type Path struct {
	nodes [disk.MaxLevel]*block
	slots [disk.MaxLevel]int
	locks [disk.MaxLevel]lockState
	// pushed is how the last pushLeafRight on this path ended.
	pushed pushOutcome

	// LowestLevel stops the search at this level; the slot there has
	// insertion-point meaning, as in a leaf.
	LowestLevel int
	// KeepLocks keeps every level whose slot is the last one locked, for
	// walking to the next leaf.
	KeepLocks bool
	// SearchForSplit pre-splits nodes as an insert does and keeps every
	// lock, for a following split_leaf (SplitItem, DuplicateItem).
	SearchForSplit bool
	// SearchForExtension means insLen counts only bytes added to an
	// existing item: no item header is subtracted when the key exists.
	SearchForExtension bool
}

// Release unlocks and forgets every level, lowest first.
func (p *Path) Release() {
	for i := range p.nodes {
		p.unlock(i)
		p.nodes[i] = nil
		p.slots[i] = 0
	}
}

// unlock drops the lock held at level, if any; the block stays in the path.
func (p *Path) unlock(level int) {
	if level >= disk.MaxLevel {
		return
	}
	switch p.locks[level] {
	case readLocked:
		p.nodes[level].mu.RUnlock()
	case writeLocked:
		p.nodes[level].mu.Unlock()
	}
	p.locks[level] = unlocked
}

// set puts a locked block in the path at its level.
func (p *Path) set(level int, b *block, l lockState) {
	p.nodes[level] = b
	p.locks[level] = l
}

// drop unlocks and forgets one level.
func (p *Path) drop(level int) {
	p.unlock(level)
	p.nodes[level] = nil
}

// parent returns the block above level, or nil at the root.
func (p *Path) parent(level int) *block {
	if level+1 >= disk.MaxLevel {
		return nil
	}
	return p.nodes[level+1]
}

// unlockUp releases the locks above level that the operation can no longer
// need (the kernel's unlock_up, ctree-algorithms.md 9.3): a level whose slot
// is 0 keeps the level above it locked (a change of its first key must be
// written there), and with KeepLocks so does a level whose slot is its last.
// Levels below lowestUnlock are never released. Releasing a write-locked
// level lowers *wll so a restart asks for fewer write locks.
func (p *Path) unlockUp(level, lowestUnlock, minWll int, wll *int) {
	skip := level
	checkSkip := true
	for i := level; i < disk.MaxLevel; i++ {
		if p.nodes[i] == nil || p.locks[i] == unlocked {
			break
		}
		if checkSkip {
			if p.slots[i] == 0 {
				skip = i + 1
				continue
			}
			if p.KeepLocks {
				n := p.nodes[i].nritems()
				if n < 1 || p.slots[i] >= n-1 {
					skip = i + 1
					continue
				}
			}
		}
		if i >= lowestUnlock && i > skip {
			checkSkip = false
			p.unlock(i)
			if wll != nil && i > minWll && i <= *wll {
				*wll = i - 1
			}
		}
	}
}

// unlockUpSafe releases every lock at level and above, whatever the slots
// (btrfs_unlock_up_safe): for callers that know no key above will change.
func (p *Path) unlockUpSafe(level int) {
	for i := level; i < disk.MaxLevel; i++ {
		if p.nodes[i] == nil {
			break
		}
		p.unlock(i)
	}
}

// Slot returns the leaf slot: the item found, or the insertion point.
func (p *Path) Slot() int { return p.slots[0] }

// SetSlot moves the leaf slot, e.g. to step over items while the leaf is
// held. Preconditions: 0 <= slot <= number of items in the leaf.
func (p *Path) SetSlot(slot int) { p.slots[0] = slot }

// Leaf returns the leaf the path ends in, or nil. The view is only valid
// while the path holds the leaf's lock.
func (p *Path) Leaf() disk.Node {
	if p.nodes[0] == nil {
		return nil
	}
	return p.nodes[0].node()
}

// NumItems returns the number of items in the path's leaf.
func (p *Path) NumItems() int {
	if p.nodes[0] == nil {
		return 0
	}
	return p.nodes[0].nritems()
}

// Valid reports whether the leaf slot is on an item.
func (p *Path) Valid() bool { return p.nodes[0] != nil && p.slots[0] < p.nodes[0].nritems() }

// Key returns the key of the item at the leaf slot. Preconditions: Valid.
func (p *Path) Key() disk.Key { return p.nodes[0].itemKey(p.slots[0]) }

// ItemData returns the payload of the item at the leaf slot, a slice of the
// leaf. It may be changed in place only when the path came from a search
// with cow and still holds the leaf's write lock. Preconditions: Valid.
func (p *Path) ItemData() []byte { return p.nodes[0].itemData(p.slots[0]) }
