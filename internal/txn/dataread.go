package txn

import (
	"fmt"

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
// front for the same reason).
func (t *Txn) DataAvailable() (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n uint64
	for _, g := range t.fs.space.Groups() {
		if g.Flags&disk.BlockGroupData != 0 {
			n += g.Free.Bytes()
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
	var unalloc uint64
	for _, e := range g.free {
		unalloc += e.Bytes()
	}
	copies := uint64(1)
	if sh.stripes > 1 {
		copies = uint64(sh.stripes)
	} else if sh.sub > 1 {
		copies = uint64(sh.sub)
	}
	return n + unalloc/copies, nil
}
