package txn

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// ReadData reads p from logical addr through the transaction's chunk
// map, which also knows the chunks this transaction added: the filesystem
// layer's read side learns those only when Commit reopens it. Copies are
// tried in turn; the caller verifies checksums.
func (t *Txn) ReadData(addr disk.LogicalAddr, p []byte) error {
	if t.done {
		return fmt.Errorf("txn: transaction %d already ended", t.gen)
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
