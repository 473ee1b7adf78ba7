package ctree

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// NextLeaf moves p to slot 0 of the leaf after its current one, read-locked
// (btrfs_next_leaf, ctree-algorithms.md 7.5). It releases the path and
// searches the current leaf's last key again with KeepLocks, so it is safe
// while other goroutines change the tree: if items were added after that
// key in the meantime, p stops on the first of them instead. ok is false
// at the end of the tree (p is then released).
func (t *Tree) NextLeaf(tx *Trans, p *Path) (ok bool, err error) {
	leaf := p.nodes[0]
	if leaf == nil || leaf.nritems() == 0 {
		p.Release()
		return false, nil
	}
	key := leaf.itemKey(leaf.nritems() - 1)
	p.Release()
	keep := p.KeepLocks
	p.KeepLocks = true
	found, err := t.Search(tx, p, key, 0, false)
	p.KeepLocks = keep
	if err != nil {
		return false, err
	}
	leaf = p.nodes[0]
	n := leaf.nritems()
	if found && p.slots[0] < n-1 || !found && p.slots[0] < n {
		// Items after key appeared in this leaf while the path was free.
		if found {
			p.slots[0]++
		}
		p.unlockUp(0, 1, 0, nil)
		return true, nil
	}
	// Walk up to the first level with a pointer to the right; it and the
	// levels below it were kept locked because their slots were last.
	level := 1
	var next *block
	for ; level < disk.MaxLevel; level++ {
		c := p.nodes[level]
		if c == nil {
			p.Release()
			return false, nil
		}
		slot := p.slots[level] + 1
		if slot >= c.nritems() {
			continue
		}
		if next, err = t.readChild(tx, c, slot); err != nil {
			p.Release()
			return false, err
		}
		next.mu.RLock()
		p.slots[level] = slot
		break
	}
	for i := 0; i < level; i++ {
		p.drop(i)
	}
	// Down the leftmost pointers to the leaf, coupling read locks.
	for l := level - 1; ; l-- {
		p.set(l, next, readLocked)
		p.slots[l] = 0
		if l == 0 {
			break
		}
		child, err := t.readChild(tx, next, 0)
		if err != nil {
			p.Release()
			return false, err
		}
		child.mu.RLock()
		next = child
	}
	p.unlockUp(0, 1, 0, nil)
	return true, nil
}

// keyBefore returns the largest key below k, if there is one.
func keyBefore(k disk.Key) (disk.Key, bool) {
	switch {
	case k.Offset > 0:
		k.Offset--
	case k.Type > 0:
		k.Type--
		k.Offset = ^uint64(0)
	case k.ObjectID > 0:
		k.ObjectID--
		k.Type = 0xff
		k.Offset = ^uint64(0)
	default:
		return k, false
	}
	return k, true
}

// PrevLeaf moves p to the last item before the first key of its current
// leaf, read-locked: the last item of the previous leaf (btrfs_prev_leaf).
// Like NextLeaf it searches again, so it is safe against concurrent
// changes. ok is false when nothing is before (p is then released).
func (t *Tree) PrevLeaf(tx *Trans, p *Path) (ok bool, err error) {
	leaf := p.nodes[0]
	if leaf == nil || leaf.nritems() == 0 {
		p.Release()
		return false, nil
	}
	orig := leaf.itemKey(0)
	key, ok := keyBefore(orig)
	p.Release()
	if !ok {
		return false, nil
	}
	found, err := t.Search(tx, p, key, 0, false)
	if err != nil || found {
		return found, err
	}
	n := p.NumItems()
	if n == 0 {
		p.Release()
		return false, nil
	}
	if p.slots[0] == n {
		p.slots[0]--
	}
	k := p.Key()
	if k == orig {
		// The original first key moved here while the path was free.
		if p.slots[0] > 0 {
			p.slots[0]--
			return true, nil
		}
		p.Release()
		return false, nil
	}
	if k.Compare(key) <= 0 {
		return true, nil
	}
	p.Release()
	return false, nil
}

// Next moves p to the following item, crossing to the next leaf when
// needed. ok is false at the end of the tree.
func (t *Tree) Next(tx *Trans, p *Path) (ok bool, err error) {
	p.slots[0]++
	for p.nodes[0] != nil && p.slots[0] >= p.nodes[0].nritems() {
		if ok, err := t.NextLeaf(tx, p); !ok || err != nil {
			return false, err
		}
	}
	return p.nodes[0] != nil, nil
}

// Prev moves p to the preceding item. ok is false at the start of the tree.
func (t *Tree) Prev(tx *Trans, p *Path) (ok bool, err error) {
	if p.nodes[0] != nil && p.slots[0] > 0 {
		p.slots[0]--
		if p.slots[0] < p.nodes[0].nritems() {
			return true, nil
		}
	}
	return t.PrevLeaf(tx, p)
}

// Range calls fn for every item with start <= key <= end, in key order,
// until fn returns false or an error. fn runs with the item's leaf
// read-locked: it must not change the tree, and data is only valid during
// the call.
func (t *Tree) Range(tx *Trans, start, end disk.Key, fn func(key disk.Key, data []byte) (bool, error)) error {
	var p Path
	defer p.Release()
	if _, err := t.Search(tx, &p, start, 0, false); err != nil {
		return err
	}
	for {
		if p.slots[0] >= p.NumItems() {
			ok, err := t.NextLeaf(tx, &p)
			if !ok || err != nil {
				return err
			}
			continue
		}
		k := p.Key()
		if end.Less(k) {
			return nil
		}
		more, err := fn(k, p.ItemData())
		if !more || err != nil {
			return err
		}
		p.slots[0]++
	}
}
