package txn

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// dataRefKey names one EXTENT_DATA_REF: the file extent items of inode ino
// in tree root whose key offset minus their extent offset is offset.
type dataRefKey struct {
	root, ino disk.ObjectID
	offset    uint64
}

// dataDelta is the net change of one data extent's references in the
// running transaction (docs/design/0006-data-extents.md).
type dataDelta struct {
	numBytes uint64
	// fresh: the extent was carved out of an AllocData reservation of
	// this transaction, so no committed EXTENT_ITEM exists for it.
	fresh bool
	refs  map[dataRefKey]int64
	// shared are the SHARED_DATA_REF changes, by the address of the
	// leaf whose file extent items reference the extent (references by
	// parent leaf, as copies of shared leaves and drops of FULL_BACKREF
	// leaves make them: cow.go).
	shared map[disk.LogicalAddr]int64
}

// dataState is the data bookkeeping of a Txn, guarded by its own mutex so
// WriteData never waits for tree operations holding t.mu.
type dataState struct {
	mu sync.Mutex
	// owned: every byte AllocData handed out in this transaction and not
	// released (WriteData may write there, nothing else).
	owned alloc.Extents
	// reserved: the part of owned no AddDataRef has claimed yet; Commit
	// gives it back.
	reserved alloc.Extents
	deltas   map[disk.LogicalAddr]*dataDelta
	// closed is set once Commit takes the changes or the transaction is
	// aborted: no more data calls are accepted (a write now could land
	// on committed data).
	closed bool
}

// errDataClosed is returned by data calls after Commit or Abort began.
func (t *Txn) errDataClosed() error {
	return fmt.Errorf("txn: transaction %d already ended", t.gen)
}

// closeData refuses further data calls.
func (t *Txn) closeData() {
	t.data.mu.Lock()
	t.data.closed = true
	t.data.owned = alloc.Extents{}
	t.data.mu.Unlock()
}

// CsumType returns the checksum algorithm of the filesystem (data sums in
// AddCsums are of this type, CsumType().Size() bytes each).
func (t *Txn) CsumType() disk.CsumType { return t.fs.sb.CsumType }

// SectorSize returns the filesystem's sector size: the unit of data
// extents, writes and checksums.
func (t *Txn) SectorSize() uint32 { return t.fs.sb.SectorSize }

// sectorAligned reports whether v is a multiple of the sector size.
func (t *Txn) sectorAligned(v uint64) bool { return v%uint64(t.fs.sb.SectorSize) == 0 }

// AllocData reserves size bytes (a non-zero multiple of the sector size)
// of DATA space, first fit, adding a DATA chunk with the filesystem's data
// profile when no group has room. The range belongs to the caller until
// AddDataRef claims it as (part of) an extent or ReleaseData gives it
// back; whatever is neither at Commit is given back there. hint is
// accepted for a future locality policy and is ignored today. A request
// larger than a whole new chunk fails with alloc.ErrNoSpace: callers split
// extents (at most disk.MaxExtentSize each, as the kernel does).
func (t *Txn) AllocData(size uint64, hint disk.LogicalAddr) (disk.LogicalAddr, error) {
	_ = hint
	if size == 0 || !t.sectorAligned(size) {
		return 0, fmt.Errorf("txn: data allocation of %d bytes is not a multiple of sector size %d", size, t.fs.sb.SectorSize)
	}
	t.data.mu.Lock()
	closed := t.data.closed
	t.data.mu.Unlock()
	if closed {
		return 0, t.errDataClosed()
	}
	t.mu.Lock()
	a, err := t.fs.space.Alloc(disk.BlockGroupData, size, 0)
	if errors.Is(err, alloc.ErrNoSpace) {
		if err = t.growLocked(disk.BlockGroupData); err == nil {
			a, err = t.fs.space.Alloc(disk.BlockGroupData, size, 0)
		}
	}
	if err == nil {
		t.touch(a)
	}
	t.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("txn: allocate %d data bytes: %w", size, err)
	}
	d := &t.data
	d.mu.Lock()
	d.owned.Insert(a, a+size)
	d.reserved.Insert(a, a+size)
	d.mu.Unlock()
	return disk.LogicalAddr(a), nil
}

// ReleaseData gives back [addr, addr+size), a part of an AllocData range no
// AddDataRef has claimed: nothing can reference it, so it is free again at
// once. Releasing anything else is an error.
func (t *Txn) ReleaseData(addr disk.LogicalAddr, size uint64) error {
	a, end := uint64(addr), uint64(addr)+size
	d := &t.data
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return t.errDataClosed()
	}
	if size == 0 || end < a || !d.reserved.Contains(a, end) {
		d.mu.Unlock()
		return fmt.Errorf("txn: release of data [%d, +%d): not an unreferenced reservation", addr, size)
	}
	d.reserved.Remove(a, end)
	d.owned.Remove(a, end)
	d.mu.Unlock()
	return t.releaseSpace(a, size)
}

// releaseSpace returns never-committed bytes to the free space at once.
func (t *Txn) releaseSpace(a, size uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.touch(a)
	if err := t.fs.space.Release(a, size); err != nil {
		return fmt.Errorf("txn: release data [%d, +%d): %w", a, size, err)
	}
	return nil
}

// WriteData writes p (a whole number of sectors) at logical addr, which
// must lie inside ranges AllocData handed out in this transaction, to
// every copy of its chunk. Small writes may be held back and written
// behind (writebehind.go): ReadData sees them, but a read through another
// handle must call FlushData first; an error of a write held back comes
// from a later data call or Commit. Those bytes are free in the last
// commit, so writing them before Commit is safe; Commit flushes and syncs
// them before any superblock references them. Safe for concurrent use.
func (t *Txn) WriteData(addr disk.LogicalAddr, p []byte) error {
	if err := t.checkDataWrite(addr, p); err != nil {
		return err
	}
	if err := t.wb.stage(p, addr); err != nil {
		return fmt.Errorf("txn: write data at %d: %w", addr, err)
	}
	return nil
}

// checkDataWrite checks a data write of p at addr (whole sectors, inside
// this transaction's data allocations) and counts its bytes.
func (t *Txn) checkDataWrite(addr disk.LogicalAddr, p []byte) error {
	a, n := uint64(addr), uint64(len(p))
	if n == 0 || !t.sectorAligned(a) || !t.sectorAligned(n) || a+n < a {
		return fmt.Errorf("txn: data write of %d bytes at %d is not sector aligned", n, addr)
	}
	t.dataBytes.Add(n)
	d := &t.data
	d.mu.Lock()
	ok, closed := d.owned.Contains(a, a+n), d.closed
	d.mu.Unlock()
	if closed {
		return t.errDataClosed()
	}
	if !ok {
		return fmt.Errorf("txn: data write [%d, +%d) outside this transaction's data allocations", addr, n)
	}
	return nil
}

// writeData is every device write of file data (the write-behind's): the
// data of older commits still on its way lands first (landOlderData).
func (t *Txn) writeData(p []byte, addr disk.LogicalAddr) error {
	if err := t.landOlderData(); err != nil {
		return err
	}
	return t.fs.wr.WriteLogical(p, addr)
}

// landOlderData waits until the data of the commits before this
// transaction is on the devices (Flight.landData): a range one of them
// released within its transaction, with bytes staged for it, may be
// handed out here, and its stale bytes must not land over new ones.
func (t *Txn) landOlderData() error { return t.fs.landDataBefore(t.gen) }

// WriteDataShared is WriteData of p, which are also the bytes of the
// host file range src: each copy is stored by sharing src's blocks where
// the device can (blockdev.SharedWriter: an image file on a host
// filesystem that clones), else written. It is not held back: what is
// staged is written first, so the device sees writes in the order they
// were made.
func (t *Txn) WriteDataShared(addr disk.LogicalAddr, p []byte, src blockdev.HostRange) error {
	if err := t.checkDataWrite(addr, p); err != nil {
		return err
	}
	write := func() error {
		if err := t.landOlderData(); err != nil {
			return err
		}
		return t.fs.wr.WriteLogicalShared(p, addr, src)
	}
	if err := t.wb.now(write); err != nil {
		return fmt.Errorf("txn: write data at %d: %w", addr, err)
	}
	return nil
}

// AddDataRef adds count references to the data extent [bytenr,
// +numBytes) from file extent items of (root, ino) whose key offset minus
// their extent offset field is offset (the EXTENT_DATA_REF triple). The
// extent is either committed (its EXTENT_ITEM must exist with this
// length) or new: then [bytenr, +numBytes) must be unclaimed AllocData
// space, and this first reference makes it an extent. Changes are
// accumulated and applied to the extent tree by Commit.
func (t *Txn) AddDataRef(bytenr disk.LogicalAddr, numBytes uint64, root, ino disk.ObjectID, offset uint64, count uint32) error {
	return t.changeDataRef(bytenr, numBytes, dataRefKey{root, ino, offset}, int64(count))
}

// DropDataRef removes count references added by AddDataRef (in this or an
// earlier transaction). When Commit finds an extent with no references
// left it deletes the EXTENT_ITEM and the checksums of the extent's whole
// range, and pins its bytes until the commit is durable (bytes allocated
// in this transaction are freed at once).
func (t *Txn) DropDataRef(bytenr disk.LogicalAddr, numBytes uint64, root, ino disk.ObjectID, offset uint64, count uint32) error {
	return t.changeDataRef(bytenr, numBytes, dataRefKey{root, ino, offset}, -int64(count))
}

// GrowDataExtent makes the data extent at bytenr, numBytes long, add
// bytes longer, taking the unclaimed AllocData bytes right after it: the
// kernel's delayed allocation writes a file's sequential writes as one
// extent, and so do we when one write continues the last. It does so only
// when the extent is this transaction's own (no committed EXTENT_ITEM),
// its one reference is the file item of (root, ino, offset), the bytes
// after it are unclaimed space of this transaction in the same block
// group, and the result is at most disk.MaxExtentSize; ok is false
// otherwise and nothing changed. The caller moves the file item's sizes.
func (t *Txn) GrowDataExtent(bytenr disk.LogicalAddr, numBytes, add uint64, root, ino disk.ObjectID, offset uint64) (ok bool, err error) {
	a, end := uint64(bytenr)+numBytes, uint64(bytenr)+numBytes+add
	if add == 0 || !t.sectorAligned(add) || end < a || numBytes+add > disk.MaxExtentSize {
		return false, nil
	}
	t.mu.Lock()
	g := t.fs.space.Group(uint64(bytenr))
	same := g != nil && g == t.fs.space.Group(end-1)
	t.mu.Unlock()
	if !same {
		return false, nil
	}
	d := &t.data
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false, t.errDataClosed()
	}
	dd := d.deltas[bytenr]
	if dd == nil || !dd.fresh || dd.numBytes != numBytes || len(dd.refs) != 1 || len(dd.shared) != 0 ||
		dd.refs[dataRefKey{root, ino, offset}] != 1 || !d.reserved.Contains(a, end) {
		return false, nil
	}
	if next := d.deltas[disk.LogicalAddr(a)]; next != nil {
		return false, nil // cannot be while [a, end) is unclaimed; be sure
	}
	d.reserved.Remove(a, end)
	dd.numBytes += add
	return true, nil
}

// FreshDataShared reports, for a data extent this transaction made (no
// committed EXTENT_ITEM yet; fresh true), whether it has references
// other than those of inode ino in tree root, as FIEMAP's SHARED flag
// tells. fresh is false for any other address.
func (t *Txn) FreshDataShared(bytenr disk.LogicalAddr, root, ino disk.ObjectID) (shared, fresh bool) {
	d := &t.data
	d.mu.Lock()
	defer d.mu.Unlock()
	dd := d.deltas[bytenr]
	if dd == nil || !dd.fresh {
		return false, false
	}
	for k, n := range dd.refs {
		if n > 0 && (k.root != root || k.ino != ino) {
			return true, true
		}
	}
	for _, n := range dd.shared {
		if n > 0 {
			return true, true
		}
	}
	return false, true
}

// addSharedDataRef records that the data extent [bytenr, +numBytes), a
// committed one, gains (delta > 0) or loses (delta < 0) references from
// file extent items of the leaf at parent: its SHARED_DATA_REF, applied
// by Commit like the keyed references of AddDataRef.
func (t *Txn) addSharedDataRef(bytenr disk.LogicalAddr, numBytes uint64, parent disk.LogicalAddr, delta int64) error {
	return t.changeRef(bytenr, numBytes, delta, func(dd *dataDelta) {
		if dd.shared == nil {
			dd.shared = map[disk.LogicalAddr]int64{}
		}
		dd.shared[parent] += delta
		if dd.shared[parent] == 0 {
			delete(dd.shared, parent)
		}
	})
}

// changeDataRef records a reference change of delta.
func (t *Txn) changeDataRef(bytenr disk.LogicalAddr, numBytes uint64, k dataRefKey, delta int64) error {
	return t.changeRef(bytenr, numBytes, delta, func(dd *dataDelta) {
		dd.refs[k] += delta
		if dd.refs[k] == 0 {
			delete(dd.refs, k)
		}
	})
}

// changeRef finds or makes the pending change of the data extent
// [bytenr, +numBytes) and lets apply add delta to it, under the data
// mutex.
func (t *Txn) changeRef(bytenr disk.LogicalAddr, numBytes uint64, delta int64, apply func(*dataDelta)) error {
	a, end := uint64(bytenr), uint64(bytenr)+numBytes
	if numBytes == 0 || end < a || !t.sectorAligned(a) || !t.sectorAligned(numBytes) || delta == 0 {
		return fmt.Errorf("txn: data ref change on [%d, +%d) count %d: bad extent or count", bytenr, numBytes, delta)
	}
	d := &t.data
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return t.errDataClosed()
	}
	if d.deltas == nil {
		d.deltas = map[disk.LogicalAddr]*dataDelta{}
	}
	dd := d.deltas[bytenr]
	if dd == nil {
		dd = &dataDelta{numBytes: numBytes, refs: map[dataRefKey]int64{}}
		if d.reserved.Contains(a, end) {
			dd.fresh = true
			d.reserved.Remove(a, end)
		} else if d.reserved.Overlaps(a, end) {
			return fmt.Errorf("txn: data extent [%d, +%d) straddles a reservation", bytenr, numBytes)
		}
		d.deltas[bytenr] = dd
	} else if dd.numBytes != numBytes {
		return fmt.Errorf("txn: data extent %d is %d bytes, not %d", bytenr, dd.numBytes, numBytes)
	}
	apply(dd)
	return nil
}

// takeDataDeltas hands the accumulated changes to Commit, sorted by
// address, and the reservations nobody claimed; both are reset and
// further data calls refused.
func (t *Txn) takeDataDeltas() ([]disk.LogicalAddr, map[disk.LogicalAddr]*dataDelta, []alloc.Range) {
	d := &t.data
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	deltas := d.deltas
	d.deltas = nil
	addrs := make([]disk.LogicalAddr, 0, len(deltas))
	for a := range deltas {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var unclaimed []alloc.Range
	for r := range d.reserved.All() {
		unclaimed = append(unclaimed, r)
	}
	d.reserved, d.owned = alloc.Extents{}, alloc.Extents{}
	return addrs, deltas, unclaimed
}
