package txn

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// ReadData reads p from logical addr through the transaction's chunk
// map, which also knows the chunks this transaction added (the filesystem
// layer shares that map, so its own reader sees them too). Copies are
// tried in turn; the caller verifies checksums.
func (t *Txn) ReadData(addr disk.LogicalAddr, p []byte) error {
	if t.done {
		return fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	if err := t.FlushData(); err != nil {
		return err
	}
	if err := t.landOlderData(); err != nil {
		return err
	}
	return t.fs.rd.ReadLogical(p, addr, nil)
}

// SetIncompat asks Commit to set incompat feature bits in the
// superblock, as the kernel does when it first writes something that
// needs them (COMPRESS_LZO, COMPRESS_ZSTD). Bits are never cleared.
func (t *Txn) SetIncompat(flags uint64) {
	t.mu.Lock()
	t.incompat |= flags
	t.mu.Unlock()
}

// DataAvailable is an upper bound of the bytes AllocData can still hand
// out: the free bytes of the DATA groups plus the unallocated device space
// new DATA chunks could use (divided by the copies the data profile
// keeps). The filesystem layer checks a change against it before it
// changes anything, so that a request that cannot fit is a plain ENOSPC
// instead of an abort half way through (the kernel reserves space up
// front for the same reason). With mixed block groups, where tree blocks
// take the same bytes, it holds back what mixedReserve says.
func (t *Txn) DataAvailable() (uint64, error) {
	pending := t.pendingItemBytes()
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.dataAvailableLocked()
	if err != nil {
		return 0, err
	}
	for _, g := range t.fs.space.Groups() {
		if g.Flags&disk.BlockGroupData != 0 && g.Flags&disk.BlockGroupMetadata != 0 {
			return n - min(n, t.mixedReserve(pending+uint64(len(t.live))*treeBlockItemBytes)), nil
		}
	}
	return n, nil
}

// DataFits reports whether AllocData can hand out n more bytes (in one
// piece or several): the free bytes of the DATA groups, then the DATA
// chunks the chunk allocator would make in the unallocated device space,
// one after another, as AllocData would add them. Unlike DataAvailable
// it never counts device space no chunk can take. With mixed block
// groups it is DataAvailable's answer.
func (t *Txn) DataFits(n uint64) (bool, error) {
	free, mixed := t.DataFreeInGroups()
	if mixed {
		// Tree blocks take the same bytes: DataAvailable holds back
		// their reserve.
		avail, err := t.DataAvailable()
		return n <= avail, err
	}
	if free >= n {
		return true, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	flags, err := t.chunkFlags(disk.BlockGroupData)
	if err != nil {
		return false, nil
	}
	g, err := t.startGrowth()
	if err != nil {
		return false, err
	}
	dry := &growth{free: make(map[disk.DevID]*alloc.Extents, len(g.free))}
	for id, e := range g.free {
		c := e.Clone()
		dry.free[id] = &c
	}
	for free < n {
		nc, err := t.planChunk(dry, flags)
		if err != nil {
			return false, nil
		}
		for _, s := range nc.item.Stripes {
			dry.free[s.DevID].Remove(uint64(s.Offset), uint64(s.Offset)+nc.stripe)
		}
		free += nc.item.Length
	}
	return true, nil
}

// GrowData adds a DATA chunk now, as AllocData does when the DATA
// groups are full: a caller that reserves data space for several changes
// at once makes room before it hands out its reservations.
func (t *Txn) GrowData() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.growLocked(disk.BlockGroupData)
}

// DataFreeInGroups is the free bytes of the DATA block groups the
// filesystem has now, without the device space new chunks could take;
// mixed reports block groups that hold data and tree blocks alike.
func (t *Txn) DataFreeInGroups() (free uint64, mixed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range t.fs.space.Groups() {
		if g.Flags&disk.BlockGroupData != 0 {
			free += t.fs.space.FreeBytes(g)
			mixed = mixed || g.Flags&disk.BlockGroupMetadata != 0
		}
	}
	return free, mixed
}

// Leaf bytes (item header included, rounded up) of the items Commit adds
// per tree block made (its extent item), per data extent changed (its
// extent item and a ref) and per data sector written (its checksum; the
// size of the checksum is added).
const (
	treeBlockItemBytes  = 80
	dataExtentItemBytes = 120
)

// pendingItemBytes estimates the leaf bytes the data changes of t add to
// the extent and checksum trees at Commit.
func (t *Txn) pendingItemBytes() uint64 {
	d := &t.data
	d.mu.Lock()
	defer d.mu.Unlock()
	sectors := d.owned.Bytes() / uint64(t.fs.sb.SectorSize)
	return uint64(len(d.deltas))*dataExtentItemBytes + sectors*uint64(t.fs.sb.CsumType.Size())
}

// mixedReserve is what a data change on a filesystem with mixed block
// groups must leave free for tree blocks: a standing reserve, in the
// spirit of the kernel's global reserve, that metadata-only changes such
// as removing files may use when data has filled the filesystem (256
// nodes, at most a sixteenth of the filesystem), plus twice the leaves
// the items Commit will add take (pending bytes of items; twice for
// half-full leaves and the paths above them). Metadata-only changes are
// not checked against it, as on other filesystems.
func (t *Txn) mixedReserve(pending uint64) uint64 {
	ns := uint64(t.fs.sb.NodeSize)
	base := min(256*ns, t.fs.sb.TotalBytes/16)
	return base + 2*(pending/ns+1)*ns
}

// dataAvailableLocked is DataAvailable without the mixed reserve, with
// t.mu held.
func (t *Txn) dataAvailableLocked() (uint64, error) {
	var n uint64
	for _, g := range t.fs.space.Groups() {
		if g.Flags&disk.BlockGroupData != 0 {
			n += t.fs.space.FreeBytes(g)
		}
	}
	flags, err := t.chunkFlags(disk.BlockGroupData)
	if err != nil {
		return n, nil // no DATA chunk to take a profile from: no growth
	}
	p, _ := chunk.ProfileOf(flags)
	sh, err := shapeOf(p)
	if err != nil {
		return n, nil
	}
	g, err := t.startGrowth()
	if err != nil {
		return 0, err
	}
	// Only holes a chunk can take count: aligned, at least minStripe
	// (a full disk's last scraps would promise what planChunk refuses,
	// and a change checked against them would abort half way).
	var unalloc uint64
	for _, e := range g.free {
		for r := range e.All() {
			lo, hi := (r.Start+chunkAlign-1)/chunkAlign*chunkAlign, r.End/chunkAlign*chunkAlign
			if hi > lo && hi-lo >= minStripe {
				unalloc += hi - lo
			}
		}
	}
	copies := uint64(1)
	if sh.stripes > 1 {
		copies = uint64(sh.stripes)
	} else if sh.sub > 1 {
		copies = uint64(sh.sub)
	}
	return n + unalloc/copies, nil
}
