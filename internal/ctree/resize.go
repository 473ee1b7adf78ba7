package ctree

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Item-level helpers that grow, shrink, split and duplicate one item in
// place (ctree-algorithms.md section 7).

// errAgain means the leaf changed while the path was released; the whole
// operation starts again.
var errAgain = errors.New("ctree: leaf changed, try again")

// ExtendItem grows the item with key by add bytes at its end and calls fill
// with the grown payload; the new tail is zeroed (btrfs_extend_item). It
// returns ErrNotFound if key is absent and ErrOverflow if the item would
// not fit in a leaf.
func (t *Tree) ExtendItem(tx *Trans, key disk.Key, add int, fill func(data []byte)) error {
	if add < 0 {
		return fmt.Errorf("ctree: extend of %v by %d bytes", key, add)
	}
	p := Path{SearchForExtension: true}
	defer p.Release()
	found, err := t.Search(tx, &p, key, add, true)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %v", ErrNotFound, key)
	}
	t.extendItem(tx, &p, add)
	if fill != nil {
		fill(p.ItemData())
	}
	return nil
}

// extendItem grows the item at the path's slot by add bytes at its end.
// The leaf has add bytes free.
func (t *Tree) extendItem(tx *Trans, p *Path, add int) {
	leaf := p.nodes[0]
	slot := p.slots[0]
	n := leaf.nritems()
	if leaf.freeSpace() < add || p.locks[0] != writeLocked || !tx.private(leaf) {
		panic(fmt.Sprintf("ctree: extend by %d in leaf %d with %d free", add, leaf.addr, leaf.freeSpace()))
	}
	end := leaf.dataEnd()
	oldEnd := leaf.itemEnd(slot)
	// The data of items [slot, n) moves down by add; item slot keeps its
	// start and gains add bytes at its end.
	leaf.moveData(end-add, end, oldEnd-end)
	for i := slot; i < n; i++ {
		leaf.setItemOffset(i, leaf.itemOffset(i)-add)
	}
	leaf.setItemSize(slot, leaf.itemSize(slot)+add)
	clear(leaf.buf[hdr+oldEnd-add : hdr+oldEnd])
}

// TruncateItem shrinks the item with key to newSize bytes
// (btrfs_truncate_item). With fromEnd it keeps the first newSize bytes;
// otherwise it drops bytes from the front and adds their number to the
// key's offset, as checksum items do, and returns the new key, which must
// stay below the next key in the tree.
func (t *Tree) TruncateItem(tx *Trans, key disk.Key, newSize int, fromEnd bool) (disk.Key, error) {
	var p Path
	defer p.Release()
	found, err := t.Search(tx, &p, key, -1, true)
	if err != nil {
		return key, err
	}
	if !found {
		return key, fmt.Errorf("%w: %v", ErrNotFound, key)
	}
	leaf := p.nodes[0]
	slot := p.slots[0]
	old := leaf.itemSize(slot)
	if newSize < 0 || newSize > old {
		return key, fmt.Errorf("ctree: truncate of %v from %d to %d bytes", key, old, newSize)
	}
	nk := key
	if !fromEnd {
		nk.Offset += uint64(old - newSize)
		if nk.Offset < key.Offset || slot+1 < leaf.nritems() && !nk.Less(leaf.itemKey(slot+1)) {
			return key, fmt.Errorf("ctree: truncate of %v from the front: new key %v passes the next key", key, nk)
		}
	}
	t.truncateItem(tx, &p, newSize, fromEnd)
	return nk, nil
}

// truncateItem shrinks the item at the path's slot to newSize bytes.
// The path comes from a search with delete intent, so the parents are
// write-locked for a key fix-up at slot 0.
func (t *Tree) truncateItem(tx *Trans, p *Path, newSize int, fromEnd bool) {
	leaf := p.nodes[0]
	slot := p.slots[0]
	n := leaf.nritems()
	old := leaf.itemSize(slot)
	if newSize == old {
		return
	}
	diff := old - newSize
	end := leaf.dataEnd()
	off := leaf.itemOffset(slot)
	for i := slot; i < n; i++ {
		leaf.setItemOffset(i, leaf.itemOffset(i)+diff)
	}
	if fromEnd {
		// Keep [off, off+newSize): it and everything below move up.
		leaf.moveData(end+diff, end, off+newSize-end)
	} else {
		// Keep [off+diff, off+old) where it is; what is below moves up.
		leaf.moveData(end+diff, end, off-end)
		k := leaf.itemKey(slot)
		k.Offset += uint64(diff)
		leaf.setItemKey(slot, k)
		if slot == 0 {
			t.fixupLowKeys(p, k, 1)
		}
	}
	leaf.setItemSize(slot, newSize)
}

// setupLeafForSplit makes sure the path's leaf has need free bytes while
// keeping the path on its item (setup_leaf_for_split): if it has not, the
// item is searched again with every lock kept and nodes pre-split, and the
// leaf split around it. errAgain means the item changed in between.
func (t *Tree) setupLeafForSplit(tx *Trans, p *Path, need int) error {
	leaf := p.nodes[0]
	if leaf.freeSpace() >= need {
		return nil
	}
	key := p.Key()
	size := leaf.itemSize(p.slots[0])
	p.Release()
	p.SearchForSplit, p.KeepLocks = true, true
	found, err := t.Search(tx, p, key, 0, true)
	p.SearchForSplit = false
	if err != nil {
		p.KeepLocks = false
		return err
	}
	leaf = p.nodes[0]
	if !found || leaf.itemSize(p.slots[0]) != size || leaf.freeSpace() >= need {
		p.KeepLocks = false
		p.Release()
		return errAgain
	}
	err = t.splitLeaf(tx, p, key, need, true)
	p.KeepLocks = false
	p.unlockUpSafe(1)
	return err
}

// searchForSplit finds key for SplitItem and DuplicateItem and makes room
// for need bytes in its leaf, retrying while the leaf changes under it.
func (t *Tree) searchForSplit(tx *Trans, p *Path, key disk.Key, need int) error {
	for {
		found, err := t.Search(tx, p, key, -1, true)
		if err != nil {
			return err
		}
		if !found {
			p.Release()
			return fmt.Errorf("%w: %v", ErrNotFound, key)
		}
		err = t.setupLeafForSplit(tx, p, need)
		if !errors.Is(err, errAgain) {
			return err
		}
	}
}

// checkNewKey verifies that nk may be placed right after the item at the
// path's slot: above its key and below the next key of the leaf.
func checkNewKey(p *Path, nk disk.Key) error {
	leaf := p.nodes[0]
	slot := p.slots[0]
	if !leaf.itemKey(slot).Less(nk) || slot+1 < leaf.nritems() && !nk.Less(leaf.itemKey(slot+1)) {
		return fmt.Errorf("%w: new key %v does not fit after %v", ErrExist, nk, leaf.itemKey(slot))
	}
	return nil
}

// SplitItem splits the item with key in two in the same leaf
// (btrfs_split_item): the first offset bytes stay under key, the rest
// becomes an item with newKey, which must sort right after key (no key in
// the tree between them).
func (t *Tree) SplitItem(tx *Trans, key, newKey disk.Key, offset int) error {
	var p Path
	defer p.Release()
	if err := t.searchForSplit(tx, &p, key, ih); err != nil {
		return err
	}
	if err := checkNewKey(&p, newKey); err != nil {
		return err
	}
	leaf := p.nodes[0]
	slot := p.slots[0]
	size := leaf.itemSize(slot)
	if offset < 0 || offset > size {
		return fmt.Errorf("ctree: split of %v (%d bytes) at %d", key, size, offset)
	}
	data := append([]byte(nil), leaf.itemData(slot)...)
	off := leaf.itemOffset(slot)
	n := leaf.nritems()
	if slot+1 < n {
		leaf.moveItems(slot+2, slot+1, n-slot-1)
	}
	// The total data length does not change: the new item takes the lower
	// addresses (the later slot, I3), the original the upper ones.
	leaf.setItemKey(slot+1, newKey)
	leaf.setItemOffset(slot+1, off)
	leaf.setItemSize(slot+1, size-offset)
	leaf.setItemOffset(slot, off+size-offset)
	leaf.setItemSize(slot, offset)
	leaf.setNritems(n + 1)
	copy(leaf.itemData(slot), data[:offset])
	copy(leaf.itemData(slot+1), data[offset:])
	return nil
}

// DuplicateItem inserts a copy of the item with key under newKey, which
// must sort right after key (btrfs_duplicate_item).
func (t *Tree) DuplicateItem(tx *Trans, key, newKey disk.Key) error {
	var p Path
	defer p.Release()
	for {
		found, err := t.Search(tx, &p, key, -1, true)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %v", ErrNotFound, key)
		}
		size := p.nodes[0].itemSize(p.slots[0])
		if size+2*ih > tx.lds()-size {
			p.Release()
			return fmt.Errorf("%w: duplicate of %v (%d bytes) needs both copies in one leaf", ErrOverflow, key, size)
		}
		err = t.setupLeafForSplit(tx, &p, size+ih)
		if errors.Is(err, errAgain) {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	if err := checkNewKey(&p, newKey); err != nil {
		return err
	}
	size := p.nodes[0].itemSize(p.slots[0])
	p.slots[0]++
	t.setupItemsForInsert(tx, &p, []disk.Key{newKey}, []int{size})
	leaf := p.nodes[0]
	copy(leaf.itemData(p.slots[0]), leaf.itemData(p.slots[0]-1))
	return nil
}
