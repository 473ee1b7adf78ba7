package txn

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// csumRun is a run of consecutive sectors' sums starting at logical start.
type csumRun struct {
	start uint64
	sums  []byte
}

// end is the address just past the run's last sector.
func (r *csumRun) end(csumSize int, sector uint64) uint64 {
	return r.start + uint64(len(r.sums)/csumSize)*sector
}

// maxCsumsPerItem is how many sums one EXTENT_CSUM item holds at most: the
// kernel's packing limit (a leaf's data area less two item headers, in
// sums, less one), which keeps every item well inside a leaf.
func (t *Txn) maxCsumsPerItem() int {
	cs := t.fs.sb.CsumType.Size()
	return (disk.LeafDataSize(int(t.fs.sb.NodeSize))-2*disk.ItemSize)/cs - 1
}

// csumKey is the key of the EXTENT_CSUM item starting at logical.
func csumKey(logical uint64) disk.Key {
	return disk.Key{ObjectID: disk.ExtentCsumObjectID, Type: disk.ExtentCsumKey, Offset: logical}
}

// csumItemBefore returns where the search for the csum items touching
// start begins: the start of the last csum item that begins at or before
// start (the only earlier item that can reach it), or start. A search and
// one step back, instead of scanning the leaf's worth of items before
// start that csumSearchFrom bounds it by: removing the checksums of many
// small extents (a commit after random writes) did that for each.
func (t *Txn) csumItemBefore(ct *ctree.Tree, start uint64) (uint64, error) {
	var p ctree.Path
	defer p.Release()
	found, err := ct.Search(t.tx, &p, csumKey(start), 0, false)
	if err != nil || found {
		return start, err
	}
	ok, err := ct.Prev(t.tx, &p)
	if err != nil || !ok {
		return start, err
	}
	if k := p.Key(); k.ObjectID == disk.ExtentCsumObjectID && k.Type == disk.ExtentCsumKey && k.Offset < start {
		return k.Offset, nil
	}
	return start, nil
}

// csumItemsAround returns the EXTENT_CSUM items that overlap or touch
// [start, end) in ascending order. An item starting before start can
// cover at most a leaf's worth of sectors, which bounds the search.
func (t *Txn) csumItemsAround(ct *ctree.Tree, start, end uint64) ([]csumRun, error) {
	cs := t.fs.sb.CsumType.Size()
	sector := uint64(t.fs.sb.SectorSize)
	from, err := t.csumItemBefore(ct, start)
	if err != nil {
		return nil, err
	}
	var runs []csumRun
	err = ct.Range(t.tx, csumKey(from), csumKey(end), func(k disk.Key, data []byte) (bool, error) {
		if k.ObjectID != disk.ExtentCsumObjectID || k.Type != disk.ExtentCsumKey {
			return true, nil
		}
		if len(data)%cs != 0 || len(data) == 0 || k.Offset%sector != 0 {
			return false, &disk.CorruptError{Tree: disk.CsumTreeObjectID, Key: &k,
				What: fmt.Sprintf("csum item of %d bytes (csum size %d)", len(data), cs)}
		}
		r := csumRun{start: k.Offset, sums: data}
		if r.end(cs, sector) >= start {
			r.sums = append([]byte(nil), data...) // only those kept are copied
			runs = append(runs, r)
		}
		return true, nil
	})
	return runs, err
}

// LockCsums keeps the csum tree as it is until the returned function is
// called: AddCsums waits meanwhile. A reader of this transaction's csums
// that walks the tree's blocks without the engine's lock coupling holds
// it while changes run in parallel.
func (t *Txn) LockCsums() (unlock func()) {
	t.csumMu.Lock()
	return t.csumMu.Unlock
}

// AddCsums records the checksums of consecutive sectors starting at
// logical: sums holds n*CsumType().Size() bytes for n sectors. Sums
// already recorded for those sectors are replaced. Items touching or
// overlapping the range are merged with it and repacked into items of at
// most maxCsumsPerItem sums, as the kernel packs them. Safe for
// concurrent use: each call is whole (csumMu).
func (t *Txn) AddCsums(logical disk.LogicalAddr, sums []byte) error {
	cs := t.fs.sb.CsumType.Size()
	sector := uint64(t.fs.sb.SectorSize)
	start := uint64(logical)
	if len(sums) == 0 || len(sums)%cs != 0 || !t.sectorAligned(start) {
		return fmt.Errorf("txn: add %d csum bytes at %d: not whole sums of %d bytes at a sector", len(sums), logical, cs)
	}
	end := start + uint64(len(sums)/cs)*sector
	if end < start {
		return fmt.Errorf("txn: csums at %d wrap the address space", logical)
	}
	ct, err := t.Tree(disk.CsumTreeObjectID)
	if err != nil {
		return err
	}
	t.csumMu.Lock()
	defer t.csumMu.Unlock()
	if done, err := t.appendCsums(ct, start, end, sums); done || err != nil {
		return err
	}
	old, err := t.csumItemsAround(ct, start, end)
	if err != nil {
		return err
	}
	merged := mergeCsums(old, csumRun{start: start, sums: sums}, cs, sector)
	for _, r := range old {
		if _, err := ct.DeleteItem(t.tx, csumKey(r.start)); err != nil {
			return err
		}
	}
	return t.insertCsumRuns(ct, merged)
}

// appendCsums is AddCsums' common case: sums for [start, end) continue
// the one item that ends at start and nothing else lies in the range, as
// when files are written one after another into one free range. The item
// grows in place, without the copy, delete and insert of the general
// case (which made adding to a large item cost its size each time). done
// is false when the case does not apply and nothing was changed.
func (t *Txn) appendCsums(ct *ctree.Tree, start, end uint64, sums []byte) (done bool, err error) {
	cs := t.fs.sb.CsumType.Size()
	sector := uint64(t.fs.sb.SectorSize)
	from, err := t.csumItemBefore(ct, start)
	if err != nil {
		return false, err
	}
	var prev disk.Key
	prevLen, touching := 0, 0
	err = ct.Range(t.tx, csumKey(from), csumKey(end), func(k disk.Key, data []byte) (bool, error) {
		if k.ObjectID != disk.ExtentCsumObjectID || k.Type != disk.ExtentCsumKey {
			return true, nil
		}
		if k.Offset+uint64(len(data)/cs)*sector >= start {
			touching++
			prev, prevLen = k, len(data)
		}
		return touching <= 1, nil
	})
	// A malformed neighbour (empty, unaligned) is left to the general
	// path, which reports it as corrupt.
	if err != nil || touching != 1 || prevLen == 0 || prevLen%cs != 0 || prev.Offset%sector != 0 ||
		prev.Offset+uint64(prevLen/cs)*sector != start ||
		prevLen+len(sums) > t.maxCsumsPerItem()*cs {
		return false, err
	}
	err = ct.ExtendItem(t.tx, prev, len(sums), func(data []byte) { copy(data[prevLen:], sums) })
	if errors.Is(err, ctree.ErrOverflow) {
		return false, nil
	}
	return err == nil, err
}

// mergeCsums overlays add on the runs old (ascending, non-overlapping)
// and returns the result as maximal runs of consecutive sectors.
func mergeCsums(old []csumRun, add csumRun, cs int, sector uint64) []csumRun {
	var out []csumRun
	put := func(r csumRun) {
		if n := len(out); n > 0 && out[n-1].end(cs, sector) == r.start {
			out[n-1].sums = append(out[n-1].sums, r.sums...)
			return
		}
		out = append(out, csumRun{start: r.start, sums: append([]byte(nil), r.sums...)})
	}
	addEnd := add.end(cs, sector)
	placed := false
	for _, r := range old {
		before, _, after := splitRun(r, add.start, addEnd, cs, sector)
		if len(before.sums) > 0 {
			put(before)
		}
		if !placed && r.end(cs, sector) > add.start {
			put(add)
			placed = true
		}
		if len(after.sums) > 0 {
			put(after)
		}
	}
	if !placed {
		put(add)
	}
	return out
}

// splitRun cuts r into the parts before, inside and after [start, end).
func splitRun(r csumRun, start, end uint64, cs int, sector uint64) (before, inside, after csumRun) {
	rEnd := r.end(cs, sector)
	cut := func(a, b uint64) csumRun {
		a, b = max(a, r.start), min(b, rEnd)
		if a >= b {
			return csumRun{start: a}
		}
		i, j := (a-r.start)/sector*uint64(cs), (b-r.start)/sector*uint64(cs)
		return csumRun{start: a, sums: r.sums[i:j]}
	}
	return cut(r.start, start), cut(start, end), cut(end, rEnd)
}

// insertCsumRuns inserts runs as items of at most maxCsumsPerItem sums.
func (t *Txn) insertCsumRuns(ct *ctree.Tree, runs []csumRun) error {
	cs := t.fs.sb.CsumType.Size()
	per := t.maxCsumsPerItem() * cs
	sector := uint64(t.fs.sb.SectorSize)
	for _, r := range runs {
		for off := 0; off < len(r.sums); off += per {
			n := min(per, len(r.sums)-off)
			at := r.start + uint64(off/cs)*sector
			if err := ct.InsertItem(t.tx, csumKey(at), r.sums[off:off+n]); err != nil {
				return fmt.Errorf("insert csum item at %d: %w", at, err)
			}
		}
	}
	return nil
}

// DeleteCsums removes the checksums of [logical, logical+length), a whole
// number of sectors, splitting items that reach past either edge. Sectors
// without sums are ignored. Commit calls it for every data extent whose
// last reference goes; callers need it only for sums of ranges that stay
// allocated. Same concurrency rules as tree operations on tree 7.
func (t *Txn) DeleteCsums(logical disk.LogicalAddr, length uint64) error {
	start, end := uint64(logical), uint64(logical)+length
	if length == 0 || end < start || !t.sectorAligned(start) || !t.sectorAligned(length) {
		return fmt.Errorf("txn: delete csums [%d, +%d): not whole sectors", logical, length)
	}
	ct, err := t.Tree(disk.CsumTreeObjectID)
	if err != nil {
		return err
	}
	old, err := t.csumItemsAround(ct, start, end)
	if err != nil {
		return err
	}
	cs, sector := t.fs.sb.CsumType.Size(), uint64(t.fs.sb.SectorSize)
	var keep []csumRun
	for _, r := range old {
		if r.end(cs, sector) <= start || r.start >= end {
			continue // only touches the range
		}
		if _, err := ct.DeleteItem(t.tx, csumKey(r.start)); err != nil {
			return err
		}
		before, _, after := splitRun(r, start, end, cs, sector)
		for _, p := range []csumRun{before, after} {
			if len(p.sums) > 0 {
				keep = append(keep, p)
			}
		}
	}
	return t.insertCsumRuns(ct, keep)
}

// CsumsCover reports whether the csum tree, as this transaction sees it,
// holds a checksum for every sector of [logical, logical+length).
func (t *Txn) CsumsCover(logical disk.LogicalAddr, length uint64) (bool, error) {
	ct, err := t.Tree(disk.CsumTreeObjectID)
	if err != nil {
		return false, err
	}
	cs := t.fs.sb.CsumType.Size()
	sector := uint64(t.fs.sb.SectorSize)
	start, end := uint64(logical), uint64(logical)+length
	runs, err := t.csumItemsAround(ct, start, end)
	if err != nil {
		return false, err
	}
	at := start
	for _, r := range runs {
		if r.start > at {
			return false, nil
		}
		at = max(at, r.end(cs, sector))
		if at >= end {
			return true, nil
		}
	}
	return at >= end, nil
}
