package ctree

import (
	"errors"
	"fmt"
	"math"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrExist is returned when inserting a key that is already in the tree.
var ErrExist = errors.New("ctree: key exists")

// ErrNotFound is returned by operations on one item when its key is not in
// the tree.
var ErrNotFound = errors.New("ctree: key not found")

// Item is one key and its payload, for batch inserts.
type Item struct {
	Key  disk.Key
	Data []byte
}

// InsertEmptyItems makes room for a batch of items with the given keys and
// data sizes and leaves p on the first of them, the leaf write-locked; the
// caller fills the data (zeroed) and releases p (btrfs_insert_empty_items).
// The keys must be strictly increasing, all must sort before the next key
// already in the tree, and the batch must fit in one leaf. It returns
// ErrExist if the first key exists or the batch runs into an existing key of
// the same leaf; the rest of the ordering contract is the caller's, as in
// the kernel.
func (t *Tree) InsertEmptyItems(tx *Trans, p *Path, keys []disk.Key, sizes []int) error {
	if len(keys) == 0 || len(keys) != len(sizes) {
		return fmt.Errorf("ctree: insert of %d keys with %d sizes", len(keys), len(sizes))
	}
	total := 0
	for i, s := range sizes {
		if s < 0 {
			return fmt.Errorf("ctree: insert of key %v with size %d", keys[i], s)
		}
		if i > 0 && !keys[i-1].Less(keys[i]) {
			return fmt.Errorf("ctree: insert batch keys not increasing at %d: %v then %v", i, keys[i-1], keys[i])
		}
		total += s + ih
	}
	if total > tx.lds() {
		return fmt.Errorf("%w: %d bytes with headers, leaf data size %d", ErrOverflow, total, tx.lds())
	}
	found, err := t.Search(tx, p, keys[0], total, true)
	if errors.Is(err, ErrOverflow) {
		// The batch fits a leaf, so only the existing item's growth
		// (the key exists) can overflow.
		return fmt.Errorf("%w: %v", ErrExist, keys[0])
	}
	if err != nil {
		return err
	}
	if found {
		p.Release()
		return fmt.Errorf("%w: %v", ErrExist, keys[0])
	}
	leaf := p.nodes[0]
	if slot := p.slots[0]; slot < leaf.nritems() && !keys[len(keys)-1].Less(leaf.itemKey(slot)) {
		k := leaf.itemKey(slot)
		p.Release()
		return fmt.Errorf("%w: batch reaches existing key %v", ErrExist, k)
	}
	t.setupItemsForInsert(tx, p, keys, sizes)
	return nil
}

// setupItemsForInsert opens the item headers and data for a batch at the
// path's slot (setup_items_for_insert). The leaf has room for them.
func (t *Tree) setupItemsForInsert(tx *Trans, p *Path, keys []disk.Key, sizes []int) {
	leaf := p.nodes[0]
	slot := p.slots[0]
	if slot == 0 {
		t.fixupLowKeys(p, keys[0], 1)
	}
	// Only the leaf changes from here on.
	p.unlockUpSafe(1)
	totalData := 0
	for _, s := range sizes {
		totalData += s
	}
	n := leaf.nritems()
	if p.locks[0] != writeLocked || !tx.private(leaf) || leaf.freeSpace() < totalData+len(keys)*ih {
		panic(fmt.Sprintf("ctree: insert of %d bytes into leaf %d with %d free (lock %d)",
			totalData+len(keys)*ih, leaf.addr, leaf.freeSpace(), p.locks[0]))
	}
	end := leaf.dataEnd()
	if slot < n {
		// Items from the slot on keep their data but it moves down by
		// totalData; their headers move up by the batch length.
		oldEnd := leaf.itemEnd(slot)
		for i := slot; i < n; i++ {
			leaf.setItemOffset(i, leaf.itemOffset(i)-totalData)
		}
		leaf.moveItems(slot+len(keys), slot, n-slot)
		leaf.moveData(end-totalData, end, oldEnd-end)
		end = oldEnd
	}
	for i, k := range keys {
		leaf.setItemKey(slot+i, k)
		end -= sizes[i]
		leaf.setItemOffset(slot+i, end)
		leaf.setItemSize(slot+i, sizes[i])
		clear(leaf.buf[hdr+end : hdr+end+sizes[i]])
	}
	leaf.setNritems(n + len(keys))
}

// InsertItem inserts one item. It returns ErrExist if key is present.
func (t *Tree) InsertItem(tx *Trans, key disk.Key, data []byte) error {
	var p Path
	defer p.Release()
	if err := t.InsertEmptyItems(tx, &p, []disk.Key{key}, []int{len(data)}); err != nil {
		return err
	}
	copy(p.ItemData(), data)
	return nil
}

// InsertItems inserts a batch of items with strictly increasing keys that
// fit in one leaf and have no existing key between them; see
// InsertEmptyItems.
func (t *Tree) InsertItems(tx *Trans, items []Item) error {
	keys := make([]disk.Key, len(items))
	sizes := make([]int, len(items))
	for i, it := range items {
		keys[i], sizes[i] = it.Key, len(it.Data)
	}
	var p Path
	defer p.Release()
	if err := t.InsertEmptyItems(tx, &p, keys, sizes); err != nil {
		return err
	}
	leaf := p.nodes[0]
	for i, it := range items {
		copy(leaf.itemData(p.slots[0]+i), it.Data)
	}
	return nil
}

// Lookup returns a copy of the payload of the item with key.
func (t *Tree) Lookup(tx *Trans, key disk.Key) (data []byte, found bool, err error) {
	var p Path
	defer p.Release()
	found, err = t.Search(tx, &p, key, 0, false)
	if err != nil || !found {
		return nil, false, err
	}
	return append([]byte(nil), p.ItemData()...), true, nil
}

// UpdateItem calls fn with the payload of the item with key, which fn may
// change in place (its size stays). It returns ErrNotFound if key is absent.
func (t *Tree) UpdateItem(tx *Trans, key disk.Key, fn func(data []byte) error) error {
	var p Path
	defer p.Release()
	found, err := t.Search(tx, &p, key, 0, true)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %v", ErrNotFound, key)
	}
	return fn(p.ItemData())
}

// DeleteItem deletes the item with key; found is false if there was none.
func (t *Tree) DeleteItem(tx *Trans, key disk.Key) (found bool, err error) {
	var p Path
	defer p.Release()
	found, err = t.Search(tx, &p, key, -1, true)
	if err != nil || !found {
		return false, err
	}
	return true, t.DeleteItems(tx, &p, p.slots[0], 1)
}

// DeleteItems deletes items [slot, slot+nr) of the path's leaf
// (btrfs_del_items). The path must come from Search with insLen < 0 and cow,
// which write-locked the leaf and its parent and balanced the nodes above.
// An emptied leaf is unlinked and freed; a leaf left less than a third full
// is merged into its siblings if they can take all of it.
func (t *Tree) DeleteItems(tx *Trans, p *Path, slot, nr int) error {
	leaf := p.nodes[0]
	n := leaf.nritems()
	if nr <= 0 || slot < 0 || slot+nr > n {
		return fmt.Errorf("ctree: delete of items [%d,%d) from a leaf of %d", slot, slot+nr, n)
	}
	if p.locks[0] != writeLocked || !tx.private(leaf) {
		panic("ctree: DeleteItems on a leaf that is not write-locked and private")
	}
	lastOff := leaf.itemOffset(slot + nr - 1)
	dsize := leaf.itemEnd(slot) - lastOff
	if slot+nr != n {
		end := leaf.dataEnd()
		leaf.moveData(end+dsize, end, lastOff-end)
		for i := slot + nr; i < n; i++ {
			leaf.setItemOffset(i, leaf.itemOffset(i)+dsize)
		}
		leaf.moveItems(slot, slot+nr, n-slot-nr)
	}
	n -= nr
	leaf.setNritems(n)
	if n == 0 {
		if p.nodes[1] != nil {
			t.delLeaf(tx, p, leaf)
		}
		return nil // an empty root leaf is an empty tree
	}
	if slot == 0 {
		t.fixupLowKeys(p, leaf.itemKey(0), 1)
	}
	if p.nodes[1] != nil && leaf.spaceUsed(0, n) < tx.lds()/3 {
		return t.mergeLeaf(tx, p, leaf)
	}
	return nil
}

// mergeLeaf tries to empty a leaf that fell under a third full into its
// siblings: as much as fits to the left (admitted only if the left sibling
// can take at least the first item), then all or nothing to the right. An
// emptied leaf is unlinked and freed.
func (t *Tree) mergeLeaf(tx *Trans, p *Path, leaf *block) error {
	slot1 := p.slots[1]
	if _, err := t.pushLeafLeft(tx, p, 0, ih+leaf.itemSize(0), true, math.MaxInt); err != nil {
		return err
	}
	if p.nodes[0] == leaf && leaf.nritems() > 0 {
		if _, err := t.pushLeafRight(tx, p, 0, leaf.spaceUsed(0, leaf.nritems()), true, 0); err != nil {
			return err
		}
	}
	if leaf.nritems() == 0 {
		p.slots[1] = slot1
		t.delLeaf(tx, p, leaf)
		tx.stats.Merges.Add(1)
		t.stats.Merges.Add(1)
	}
	return nil
}

// DeleteRange deletes every item with start <= key <= end and returns how
// many it deleted. Each leaf's run of items goes in one DeleteItems.
func (t *Tree) DeleteRange(tx *Trans, start, end disk.Key) (int, error) {
	total := 0
	for !end.Less(start) {
		var p Path
		if _, err := t.Search(tx, &p, start, -1, true); err != nil {
			return total, err
		}
		leaf := p.nodes[0]
		slot := p.slots[0]
		if slot >= leaf.nritems() {
			// The next key, if any, is in a later leaf.
			p.Release()
			k, ok, err := t.firstFrom(tx, start)
			if err != nil || !ok || end.Less(k) {
				return total, err
			}
			start = k
			continue
		}
		nr := 0
		for slot+nr < leaf.nritems() && !end.Less(leaf.itemKey(slot+nr)) {
			nr++
		}
		if nr == 0 {
			p.Release()
			return total, nil
		}
		last := leaf.itemKey(slot + nr - 1)
		err := t.DeleteItems(tx, &p, slot, nr)
		p.Release()
		if err != nil {
			return total, err
		}
		total += nr
		var ok bool
		if start, ok = keyAfter(last); !ok {
			break
		}
	}
	return total, nil
}

// firstFrom returns the first key >= k.
func (t *Tree) firstFrom(tx *Trans, k disk.Key) (disk.Key, bool, error) {
	var p Path
	defer p.Release()
	if _, err := t.Search(tx, &p, k, 0, false); err != nil {
		return disk.Key{}, false, err
	}
	for p.slots[0] >= p.NumItems() {
		ok, err := t.NextLeaf(tx, &p)
		if !ok || err != nil {
			return disk.Key{}, false, err
		}
	}
	return p.Key(), true, nil
}

// keyAfter returns the smallest key above k, if there is one.
func keyAfter(k disk.Key) (disk.Key, bool) {
	switch {
	case k.Offset < ^uint64(0):
		k.Offset++
	case k.Type < 0xff:
		k.Type++
		k.Offset = 0
	case k.ObjectID < ^disk.ObjectID(0):
		k.ObjectID++
		k.Type, k.Offset = 0, 0
	default:
		return k, false
	}
	return k, true
}
