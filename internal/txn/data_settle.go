package txn

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// dataExtent is what the extent tree holds for one data extent: the
// EXTENT_ITEM and its keyed back-reference items.
type dataExtent struct {
	found bool
	key   disk.Key
	item  disk.ExtentItem
	// refs are the EXTENT_DATA_REFs, inline and keyed, by triple.
	refs map[dataRefKey]uint64
	// shared are the SHARED_DATA_REFs, inline and keyed, by the
	// address of the parent leaf.
	shared map[disk.LogicalAddr]uint64
	// other are inline refs this package does not change
	// (EXTENT_OWNER_REF), kept verbatim.
	other []disk.InlineRef
	// keyed are the keys of the keyed EXTENT_DATA_REF and
	// SHARED_DATA_REF items (rewritten).
	keyed []disk.Key
}

// total is the reference count the extent item must carry.
func (x *dataExtent) total() uint64 {
	var n uint64
	for _, c := range x.refs {
		n += c
	}
	for _, c := range x.shared {
		n += c
	}
	for i := range x.other {
		n += x.other[i].RefCount()
	}
	return n
}

// settleData applies the accumulated data reference changes to the
// extent tree, frees extents left without references (and deletes their
// checksums), and gives back reservations nobody claimed. It runs first
// in every pass of the fixpoint; after the first pass it has nothing to
// do, since only the file-system layer adds changes.
func (t *Txn) settleData() error {
	addrs, deltas, unclaimed := t.takeDataDeltas()
	if len(addrs) == 0 && len(unclaimed) == 0 {
		return nil
	}
	// The checksums of the extents freed go in runs of neighbouring
	// extents after them: a file rewritten in small writes frees
	// thousands of small extents side by side, and deleting each one's
	// checksums alone split and rewrote the same csum items over and
	// over (a fifth of a commit's time in bench fileio seqwr).
	var gone []alloc.Range
	for _, a := range addrs {
		if err := t.settleDataExtent(a, deltas[a], &gone); err != nil {
			return fmt.Errorf("data extent %d: %w", a, err)
		}
	}
	if err := t.deleteCsumRuns(gone); err != nil {
		return err
	}
	for _, r := range unclaimed {
		if err := t.releaseSpace(r.Start, r.Len()); err != nil {
			return err
		}
	}
	return nil
}

// maxCsumRun bounds the bytes of data whose checksums one DeleteCsums
// call of deleteCsumRuns removes (it holds their items in memory).
const maxCsumRun = 64 << 20

// deleteCsumRuns deletes the checksums of ranges (in ascending order,
// not overlapping), neighbours merged into one call.
func (t *Txn) deleteCsumRuns(ranges []alloc.Range) error {
	for i := 0; i < len(ranges); {
		r := ranges[i]
		j := i + 1
		for ; j < len(ranges) && ranges[j].Start == r.End && ranges[j].End-r.Start <= maxCsumRun; j++ {
			r.End = ranges[j].End
		}
		if err := t.DeleteCsums(disk.LogicalAddr(r.Start), r.Len()); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// settleDataExtent applies one extent's changes. The checksums of an
// extent it frees are for the caller to delete: the range goes to gone.
func (t *Txn) settleDataExtent(a disk.LogicalAddr, dd *dataDelta, gone *[]alloc.Range) error {
	if !dd.fresh && len(dd.refs) == 0 && len(dd.shared) == 0 {
		return nil // the changes cancelled out
	}
	et, err := t.Tree(disk.ExtentTreeObjectID)
	if err != nil {
		return err
	}
	x, err := t.readDataExtent(et, a)
	if err != nil {
		return err
	}
	switch {
	case dd.fresh && x.found:
		return disk.Corruptf("extent item %v exists over space allocated in this transaction", x.key)
	case !dd.fresh && !x.found:
		return fmt.Errorf("txn: reference change on data extent [%d, +%d) which does not exist", a, dd.numBytes)
	case x.found && x.key.Offset != dd.numBytes:
		return fmt.Errorf("txn: data extent %d is %d bytes, references name %d", a, x.key.Offset, dd.numBytes)
	}
	for k, d := range dd.refs {
		n := int64(x.refs[k]) + d
		if n < 0 {
			return fmt.Errorf("txn: dropping %d refs of (root %d, inode %d, offset %d) but only %d exist",
				-d, k.root, k.ino, k.offset, x.refs[k])
		}
		if n == 0 {
			delete(x.refs, k)
		} else {
			x.refs[k] = uint64(n)
		}
	}
	for p, d := range dd.shared {
		n := int64(x.shared[p]) + d
		if n < 0 {
			return fmt.Errorf("txn: dropping %d refs by parent leaf %d but only %d exist", -d, p, x.shared[p])
		}
		if n == 0 {
			delete(x.shared, p)
		} else {
			x.shared[p] = uint64(n)
		}
	}
	if err := t.deleteDataExtentItems(et, &x); err != nil {
		return err
	}
	if x.total() > 0 {
		gen := t.gen
		if x.found {
			gen = x.item.Generation
		}
		return t.insertDataExtent(et, a, dd.numBytes, gen, &x)
	}
	*gone = append(*gone, alloc.Range{Start: uint64(a), End: uint64(a) + dd.numBytes})
	t.mu.Lock()
	defer t.mu.Unlock()
	t.touch(uint64(a))
	if dd.fresh && !t.mixedAt(uint64(a)) {
		// Written in this transaction and overwritten in it: nothing
		// committed points here, and only a later transaction's data
		// can take the bytes (docs/design/0009, "How long a view
		// lives").
		if err := t.fs.space.Release(uint64(a), dd.numBytes); err != nil {
			return fmt.Errorf("txn: release data [%d, +%d): %w", a, dd.numBytes, err)
		}
		return nil
	}
	// Committed, or in a mixed group: pinned until the commit is
	// durable and a later transaction begins. In a mixed group this
	// commit's own tree blocks would otherwise take a fresh extent's
	// bytes at once and write over them while a reader of a view of
	// this transaction published before the overwrite may still read
	// the extent: a file without checksums would return tree blocks.
	if err := t.fs.space.Free(uint64(a), dd.numBytes); err != nil {
		return fmt.Errorf("txn: free data extent %d: %w", a, err)
	}
	return nil
}

// mixedAt reports whether the block group holding a takes tree blocks
// as well as data (MIXED_GROUPS). t.mu held.
func (t *Txn) mixedAt(a uint64) bool {
	g := t.fs.space.Group(a)
	return g != nil && g.Flags&disk.BlockGroupData != 0 && g.Flags&(disk.BlockGroupMetadata|disk.BlockGroupSystem) != 0
}

// readDataExtent collects the extent item at a and its keyed refs.
// Block group items share the objectid of an extent at a group's start
// and are skipped.
func (t *Txn) readDataExtent(et *ctree.Tree, a disk.LogicalAddr) (dataExtent, error) {
	x := dataExtent{refs: map[dataRefKey]uint64{}, shared: map[disk.LogicalAddr]uint64{}}
	start := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.ExtentItemKey}
	end := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.SharedDataRefKey, Offset: ^uint64(0)}
	err := et.Range(t.tx, start, end, func(k disk.Key, data []byte) (bool, error) {
		bad := func(what string, err error) error {
			return &disk.CorruptError{Logical: a, Tree: disk.ExtentTreeObjectID, Key: &k, What: what, Err: err}
		}
		switch k.Type {
		case disk.ExtentItemKey:
			x.found, x.key = true, k
			if err := x.item.Decode(data); err != nil {
				return false, bad("extent item", err)
			}
			if x.item.Flags&disk.ExtentFlagData == 0 {
				return false, bad("data reference to a tree block extent", nil)
			}
			for _, r := range x.item.InlineRefs {
				switch r.Type {
				case disk.ExtentDataRefKey:
					x.refs[dataRefKey{r.Data.Root, r.Data.ObjectID, r.Data.Offset}] += uint64(r.Data.Count)
				case disk.SharedDataRefKey:
					x.shared[disk.LogicalAddr(r.Offset)] += uint64(r.Count)
				default:
					x.other = append(x.other, r)
				}
			}
		case disk.MetadataItemKey:
			return false, bad("data reference to a tree block", nil)
		case disk.ExtentDataRefKey:
			var rs disk.ExtentDataRefs
			if err := rs.Decode(data); err != nil {
				return false, bad("extent data ref", err)
			}
			for _, r := range rs {
				x.refs[dataRefKey{r.Root, r.ObjectID, r.Offset}] += uint64(r.Count)
			}
			x.keyed = append(x.keyed, k)
		case disk.SharedDataRefKey:
			var r disk.SharedDataRef
			if err := r.Decode(data); err != nil {
				return false, bad("shared data ref", err)
			}
			x.shared[disk.LogicalAddr(k.Offset)] += uint64(r.Count)
			x.keyed = append(x.keyed, k)
		}
		return true, nil
	})
	if err != nil {
		return x, err
	}
	if x.found && x.total() != x.item.Refs {
		k := x.key
		return x, &disk.CorruptError{Logical: a, Tree: disk.ExtentTreeObjectID, Key: &k,
			What: fmt.Sprintf("data extent refs %d but back-references count %d", x.item.Refs, x.total())}
	}
	return x, nil
}

// deleteDataExtentItems removes the extent item and its keyed
// EXTENT_DATA_REF and SHARED_DATA_REF items (insertDataExtent writes
// them anew).
func (t *Txn) deleteDataExtentItems(et *ctree.Tree, x *dataExtent) error {
	keys := x.keyed
	if x.found {
		keys = append([]disk.Key{x.key}, keys...)
	}
	for _, k := range keys {
		if _, err := et.DeleteItem(t.tx, k); err != nil {
			return fmt.Errorf("delete %v: %w", k, err)
		}
	}
	return nil
}

// maxInlineDataItem is the largest data EXTENT_ITEM this package writes:
// a sixteenth of a leaf's data area less an item header (992 bytes for 16
// KiB nodes, 224 for 4 KiB), below the kernel's own inline limit. Refs
// that would make the item larger become keyed EXTENT_DATA_REF items.
func (t *Txn) maxInlineDataItem() int {
	return disk.LeafDataSize(int(t.fs.sb.NodeSize))/16 - disk.ItemSize
}

// insertDataExtent writes the EXTENT_ITEM of [a, +numBytes) with x's
// refs. Rule: refs other than EXTENT_DATA_REF and SHARED_DATA_REF stay
// inline; those two are taken in the inline order (type ascending, so
// every EXTENT_DATA_REF before any SHARED_DATA_REF; within a type hash or
// parent address descending) and stay inline while the item fits
// maxInlineDataItem; the rest go to keyed items: EXTENT_DATA_REFs with
// the same hash sharing one (bytenr, EXTENT_DATA_REF, hash) item,
// SHARED_DATA_REFs one (bytenr, SHARED_DATA_REF, parent) item each.
func (t *Txn) insertDataExtent(et *ctree.Tree, a disk.LogicalAddr, numBytes uint64, gen disk.Generation, x *dataExtent) error {
	refs := make([]disk.InlineRef, 0, len(x.refs)+len(x.shared))
	for _, k := range slices.SortedFunc(maps.Keys(x.refs), compareRefKeys) {
		refs = append(refs, disk.InlineRef{Type: disk.ExtentDataRefKey,
			Data: disk.ExtentDataRef{Root: k.root, ObjectID: k.ino, Offset: k.offset, Count: uint32(x.refs[k])}})
	}
	for _, p := range slices.Sorted(maps.Keys(x.shared)) {
		refs = append(refs, disk.InlineRef{Type: disk.SharedDataRefKey, Offset: uint64(p), Count: uint32(x.shared[p])})
	}
	disk.SortInlineRefs(refs)
	it := disk.ExtentItem{Refs: x.total(), Generation: gen, Flags: disk.ExtentFlagData,
		InlineRefs: slices.Clone(x.other)}
	size := it.Size()
	n := 0
	for n < len(refs) && size+refs[n].Size() <= t.maxInlineDataItem() {
		size += refs[n].Size()
		n++
	}
	it.InlineRefs = append(it.InlineRefs, refs[:n]...)
	disk.SortInlineRefs(it.InlineRefs)
	buf := make([]byte, it.Size())
	it.Encode(buf)
	key := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.ExtentItemKey, Offset: numBytes}
	if err := et.InsertItem(t.tx, key, buf); err != nil {
		return fmt.Errorf("insert %v: %w", key, err)
	}
	keyed := map[uint64]disk.ExtentDataRefs{}
	var shared []disk.InlineRef
	for _, r := range refs[n:] {
		if r.Type == disk.SharedDataRefKey {
			shared = append(shared, r)
			continue
		}
		keyed[r.Data.Hash()] = append(keyed[r.Data.Hash()], r.Data)
	}
	for _, h := range slices.Sorted(maps.Keys(keyed)) {
		rs := keyed[h]
		b := make([]byte, rs.Size())
		rs.Encode(b)
		k := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.ExtentDataRefKey, Offset: h}
		if err := et.InsertItem(t.tx, k, b); err != nil {
			return fmt.Errorf("insert %v: %w", k, err)
		}
	}
	for _, r := range shared {
		sr := disk.SharedDataRef{Count: r.Count}
		b := make([]byte, sr.Size())
		sr.Encode(b)
		k := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.SharedDataRefKey, Offset: r.Offset}
		if err := et.InsertItem(t.tx, k, b); err != nil {
			return fmt.Errorf("insert %v: %w", k, err)
		}
	}
	return nil
}

// compareRefKeys orders ref triples, so equal-hash refs come out in a
// deterministic order.
func compareRefKeys(a, b dataRefKey) int {
	switch {
	case a.root != b.root:
		return cmpU64(uint64(a.root), uint64(b.root))
	case a.ino != b.ino:
		return cmpU64(uint64(a.ino), uint64(b.ino))
	}
	return cmpU64(a.offset, b.offset)
}

// cmpU64 is cmp.Compare for uint64.
func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
