package ctree

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Trans is the engine's side of one running transaction: its generation,
// the store, the Stats collector, and the table of blocks in use (the
// kernel's extent buffer cache, kept per transaction). Many goroutines may
// use one Trans at once, on one tree or several.
//
// Every block a tree operation touches goes through the table, so there is
// exactly one in-memory block (and one lock) per address. Blocks created in
// this transaction and not yet written are the dirty set, written out by
// WriteDirty.
type Trans struct {
	gen      disk.Generation // immutable
	store    Store           // immutable
	stats    *Stats          // immutable
	params   Params          // immutable
	maxPtrs  int             // immutable: key pointers per node (NP)
	dataSize int             // immutable: leaf data size (LDS)

	mu     sync.Mutex
	blocks map[disk.LogicalAddr]*block // every block used; protected by mu
	dirty  map[disk.LogicalAddr]*block // private blocks to write; protected by mu

	// Published views (views.go): wep is the epoch the running changes
	// write in (0 until the first publication); the rest is views.go's.
	wep     atomic.Uint64
	liveTop atomic.Uint64 // the newest live view's epoch + 1; 0 for none
	vmu     sync.Mutex
	pins    map[uint64][]pinned              // protected by vmu
	gone    map[disk.LogicalAddr][]goneBlock // protected by mu
	nvers   atomic.Int64                     // versions kept besides the current ones
	copies  atomic.Int64                     // blocks copied for views
}

// NewTrans starts the engine's view of transaction gen over s. Counters go
// to stats (a fresh Stats when nil). gen must be newer than every block
// already in the store.
func NewTrans(s Store, gen disk.Generation, stats *Stats) *Trans {
	if stats == nil {
		stats = new(Stats)
	}
	p := s.Params()
	return &Trans{gen: gen, store: s, stats: stats, params: p,
		maxPtrs: disk.MaxKeyPtrs(p.NodeSize), dataSize: disk.LeafDataSize(p.NodeSize),
		blocks: map[disk.LogicalAddr]*block{}, dirty: map[disk.LogicalAddr]*block{}}
}

// Generation returns the transaction id.
func (tx *Trans) Generation() disk.Generation { return tx.gen }

// Stats returns the counters this transaction adds to.
func (tx *Trans) Stats() *Stats { return tx.stats }

// Store returns the store blocks come from and go to.
func (tx *Trans) Store() Store { return tx.store }

// DirtyBlocks returns the number of blocks waiting to be written.
func (tx *Trans) DirtyBlocks() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return len(tx.dirty)
}

// FirstKey returns the first key of the block at addr as this transaction
// holds it (the zero key for an empty block); ok is false when the
// transaction holds no block there. Non-skinny extent items record it in
// their tree block info. Preconditions: no tree operation writes the
// block concurrently.
func (tx *Trans) FirstKey(addr disk.LogicalAddr) (k disk.Key, ok bool) {
	tx.mu.Lock()
	b := tx.blocks[addr]
	tx.mu.Unlock()
	if b == nil {
		return disk.Key{}, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.firstKey(), true
}

// WriteDirty writes out every dirty block, in address order: it sets the
// header's WRITTEN flag and hands the block to the store, which computes
// the checksum. Afterwards those blocks are no longer private: changing one
// again, even in this transaction, copies it first (ctree-algorithms.md
// section 2.1). Preconditions: no tree operation runs concurrently.
func (tx *Trans) WriteDirty() (int, error) {
	tx.mu.Lock()
	list := make([]*block, 0, len(tx.dirty))
	for _, b := range tx.dirty {
		list = append(list, b)
	}
	clear(tx.dirty)
	tx.mu.Unlock()
	slices.SortFunc(list, func(a, b *block) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
	wep := tx.wep.Load()
	for _, b := range list {
		if b.tx == tx && b.ep < wep && b.ep < tx.liveTop.Load() {
			// Published views may read these bytes: the header flag and
			// the checksum go into a copy.
			b.buf = append([]byte(nil), b.buf...)
		}
		le.PutUint64(b.buf[offFlags:], b.flags()|disk.HeaderFlagWritten)
		if err := tx.store.Write(b.addr, b.buf); err != nil {
			return 0, fmt.Errorf("write tree block %d: %w", b.addr, err)
		}
		if b.treeStats != nil {
			b.treeStats.BlocksWritten.Add(1)
		}
	}
	tx.stats.BlocksWritten.Add(int64(len(list)))
	return len(list), nil
}

// lookup returns the block at e.Bytenr from the table, reading it from the
// store on first use. A block already in the table is checked against the
// level and generation the parent promises (I5, I6); the store checks
// blocks it reads completely.
func (tx *Trans) lookup(e disk.Expect) (*block, error) {
	tx.mu.Lock()
	b := tx.blocks[e.Bytenr]
	tx.mu.Unlock()
	if b == nil {
		n, err := tx.store.ReadBlock(e.Bytenr, e)
		if err != nil {
			return nil, err
		}
		if len(n) != tx.params.NodeSize {
			return nil, &disk.CorruptError{Logical: e.Bytenr, Tree: e.Owner,
				What: fmt.Sprintf("block of %d bytes, node size %d", len(n), tx.params.NodeSize)}
		}
		nb := &block{addr: e.Bytenr, buf: n}
		tx.mu.Lock()
		if b = tx.blocks[e.Bytenr]; b == nil {
			b = nb
			tx.blocks[e.Bytenr] = b
		}
		tx.mu.Unlock()
		return b, nil
	}
	// Generation and level of a block never change while it is reachable
	// (except the level of a root, which is not reached through a pointer),
	// so reading them without the block's lock is safe; but not through
	// b.buf, which a change holding the lock replaces when it keeps the
	// bytes for views (keepForViews): through the versions, which are
	// published atomically and all carry the same header.
	hdr := b.headerBytes()
	level, gen := int(hdr[offLevel]), disk.Generation(le.Uint64(hdr[offGen:]))
	if (e.Level >= 0 && level != e.Level) || (e.Generation != 0 && gen != e.Generation) {
		return nil, &disk.CorruptError{Logical: e.Bytenr, Tree: e.Owner,
			What: fmt.Sprintf("cached block level %d generation %d, parent expects level %d generation %d",
				level, gen, e.Level, e.Generation)}
	}
	return b, nil
}

// np is the number of key pointers a node holds (NP).
func (tx *Trans) np() int { return tx.maxPtrs }

// lds is the leaf data size (LDS).
func (tx *Trans) lds() int { return tx.dataSize }

// add records a block created in this transaction: in the table, and in
// the dirty set.
func (tx *Trans) add(b *block) {
	// Views published before now never reach it: its bytes belong to the
	// epoch being written. It is in no table yet.
	b.tx = tx
	b.ep = tx.wep.Load()
	b.vers.Store(&[]bufVersion{{ep: b.ep, buf: b.buf}})
	tx.mu.Lock()
	tx.blocks[b.addr] = b
	tx.dirty[b.addr] = b
	tx.mu.Unlock()
}

// private reports whether b may be changed in place: created in this
// transaction and not written out since (the inverse of should_cow).
func (tx *Trans) private(b *block) bool {
	return b.generation() == tx.gen && !b.written()
}

// free hands a block of tree t that no tree points to back to the store,
// and forgets it: it is never written (the kernel's clean_tree_block).
func (tx *Trans) free(t *Tree, b *block) {
	reuse := tx.private(b)
	tx.mu.Lock()
	delete(tx.dirty, b.addr)
	if reuse {
		// The address may come back from Alloc for another block.
		delete(tx.blocks, b.addr)
		tx.keepGone(b)
	}
	tx.mu.Unlock()
	tx.store.Free(b.addr, reuse)
	tx.stats.BlocksFreed.Add(1)
	t.stats.BlocksFreed.Add(1)
	t.blocks.Add(-1)
}

// forget is free for a block whose release the store has taken on
// itself (SharedStore): the engine stops writing it, the store is not
// told.
func (tx *Trans) forget(t *Tree, b *block) {
	tx.mu.Lock()
	delete(tx.dirty, b.addr)
	tx.mu.Unlock()
	tx.stats.BlocksFreed.Add(1)
	t.stats.BlocksFreed.Add(1)
	t.blocks.Add(-1)
}

// newBlock allocates a block for tree t at level, with a fresh header and
// no items, write-locked, and records it as dirty.
func (tx *Trans) newBlock(t *Tree, level int, hint disk.LogicalAddr) (*block, error) {
	return tx.newBlockFrom(t, level, hint, nil)
}

// newBlockFrom is newBlock with the contents of src, header included, when
// src is not nil: the caller rewrites the header fields that change.
// Copying at allocation spares clearing a buffer that is overwritten at
// once (copyBlock).
func (tx *Trans) newBlockFrom(t *Tree, level int, hint disk.LogicalAddr, src []byte) (*block, error) {
	owner := t.owner
	addr, err := tx.store.Alloc(owner, level, hint)
	if err != nil {
		return nil, fmt.Errorf("allocate tree block (tree %s level %d): %w", owner.TreeName(), level, err)
	}
	var buf []byte
	if src != nil {
		buf = make([]byte, len(src))
		copy(buf, src) // one allocation without clearing (make + copy)
	} else {
		buf = make([]byte, tx.params.NodeSize)
	}
	b := &block{addr: addr, buf: buf, treeStats: t.stats}
	if src == nil {
		h := disk.Header{FSID: tx.params.FSID, Bytenr: addr, Flags: disk.MixedBackrefRev << disk.BackrefRevShift,
			ChunkTreeUUID: tx.params.ChunkTreeUUID, Generation: tx.gen, Owner: owner, Level: uint8(level)}
		h.Encode(b.buf)
	} // else the caller rewrites the header fields that change (copyBlock)
	b.lockW()
	tx.add(b)
	tx.stats.BlocksAllocated.Add(1)
	t.stats.BlocksAllocated.Add(1)
	t.blocks.Add(1)
	return b, nil
}

// copyBlock allocates a copy of b for tree t (the first half of
// btrfs_force_cow_block): same content, new bytenr, this generation,
// WRITTEN and RELOC cleared, owner and fsid rewritten. The copy is
// write-locked and dirty.
func (tx *Trans) copyBlock(t *Tree, b *block) (*block, error) {
	const gib = 1 << 30
	owner := t.owner
	nb, err := tx.newBlockFrom(t, b.level(), b.addr&^(gib-1), b.buf)
	if err != nil {
		return nil, err
	}
	addr := nb.addr
	copy(nb.buf[offFSID:offFSID+16], tx.params.FSID[:])
	le.PutUint64(nb.buf[offBytenr:], uint64(addr))
	const revMask = uint64(0xff) << disk.BackrefRevShift
	le.PutUint64(nb.buf[offFlags:], b.flags()&^(disk.HeaderFlagWritten|disk.HeaderFlagReloc|revMask)|
		disk.MixedBackrefRev<<disk.BackrefRevShift)
	le.PutUint64(nb.buf[offGen:], uint64(tx.gen))
	le.PutUint64(nb.buf[offOwner:], uint64(owner))
	return nb, nil
}

// BlockVersion identifies what a transaction's block held at one moment
// (SnapshotVersion): it changes whenever a tree operation may have
// changed the block, and two blocks that had the same address never
// share one. The zero value matches no block.
type BlockVersion struct {
	b   *block
	mod uint64
}

// SnapshotVersion is Snapshot for a reader that keeps copies: when the
// block at addr is still at version have, or holds exactly the bytes of
// old (the copy made at have: a write lock taken for a change that then
// went elsewhere leaves the bytes as they were), it returns no copy (n
// nil) and the current version; otherwise a copy and its version. ok is
// false when the table does not hold addr.
func (tx *Trans) SnapshotVersion(addr disk.LogicalAddr, have BlockVersion, old disk.Node) (n disk.Node, v BlockVersion, ok bool) {
	tx.mu.Lock()
	b := tx.blocks[addr]
	tx.mu.Unlock()
	if b == nil {
		return nil, BlockVersion{}, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	v = BlockVersion{b: b, mod: b.mod}
	if v == have || (have.b == b && bytes.Equal(old, b.buf)) {
		return nil, v, true
	}
	return disk.Node(append([]byte(nil), b.buf...)), v, true
}

// Snapshot returns a copy of the block at addr as this transaction sees it
// now, when the transaction's table holds it: a block created here (dirty,
// without a valid checksum yet) or a committed block a tree operation has
// read. ok is false for any other address, which the committed store
// serves. Readers use it to see uncommitted changes without taking part
// in the transaction; the copy is taken under the block's read lock, so it
// is consistent even while tree operations run.
func (tx *Trans) Snapshot(addr disk.LogicalAddr) (n disk.Node, ok bool) {
	tx.mu.Lock()
	b := tx.blocks[addr]
	tx.mu.Unlock()
	if b == nil {
		return nil, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return disk.Node(append([]byte(nil), b.buf...)), true
}
