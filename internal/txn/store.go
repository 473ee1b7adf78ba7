package txn

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// ReadBlock implements ctree.Reader: a block written in this transaction
// comes from memory, anything else from disk, checked completely.
func (t *Txn) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	t.mu.Lock()
	b, ok := t.pending[addr]
	t.mu.Unlock()
	if ok {
		n := disk.Node(append([]byte(nil), b...))
		if err := n.CheckExpect(t.fs.blockParams(), e); err != nil {
			return nil, err
		}
		return n, nil
	}
	return t.fs.ReadBlock(addr, e)
}

// Alloc implements ctree.Store: a nodesize-aligned block from a METADATA
// group, or a SYSTEM group for the chunk tree; when the groups are full a
// new chunk of that type is allocated first.
func (t *Txn) Alloc(owner disk.ObjectID, level int, hint disk.LogicalAddr) (disk.LogicalAddr, error) {
	want := disk.BlockGroupMetadata
	if owner == disk.ChunkTreeObjectID {
		want = disk.BlockGroupSystem
	}
	ns := uint64(t.fs.sb.NodeSize)
	t.mu.Lock()
	defer t.mu.Unlock()
	a, err := t.fs.space.Alloc(want, ns, ns)
	if errors.Is(err, alloc.ErrNoSpace) {
		// Every group of the type is full: add a chunk (chunkalloc.go).
		if err = t.growLocked(want); err == nil {
			a, err = t.fs.space.Alloc(want, ns, ns)
		}
	}
	if err != nil {
		return 0, err
	}
	addr := disk.LogicalAddr(a)
	t.live[addr] = blockInfo{owner: owner, level: level}
	t.touch(a)
	return addr, nil
}

// Free implements ctree.Store. A block made in this transaction (reuse)
// goes straight back to the free space: nothing committed points at it,
// and reusing its address keeps the commit's fixpoint from chasing blocks
// that move every pass. Any other block is pinned until the commit.
func (t *Txn) Free(addr disk.LogicalAddr, reuse bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, addr)
	_, fresh := t.live[addr]
	release := t.fs.space.Free
	if reuse && fresh {
		release = t.fs.space.Release
	}
	if err := release(uint64(addr), uint64(t.fs.sb.NodeSize)); err != nil && t.err == nil {
		t.err = fmt.Errorf("free tree block %d: %w", addr, err)
		if !(reuse && fresh) {
			// A committed block the extent tree does not record as
			// allocated: the image is damaged.
			t.err = fmt.Errorf("%w: committed tree block %d not allocated in the extent tree: %w", disk.ErrCorrupt, addr, err)
		}
	}
	t.touch(uint64(addr))
	if _, ok := t.live[addr]; ok {
		delete(t.live, addr)
		if t.recorded[addr] {
			delete(t.recorded, addr)
			t.gone[addr] = true
		}
		return
	}
	t.gone[addr] = true
}

// Write implements ctree.Store: checksum the block and keep it until the
// commit writes it out.
func (t *Txn) Write(addr disk.LogicalAddr, block []byte) error {
	if len(block) != int(t.fs.sb.NodeSize) {
		return fmt.Errorf("txn: write of %d bytes at %d, node size %d", len(block), addr, t.fs.sb.NodeSize)
	}
	t.fs.sb.CsumType.SumBlock(block)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.live[addr]; !ok {
		return fmt.Errorf("txn: write to block %d not allocated in transaction %d", addr, t.gen)
	}
	t.pending[addr] = block
	return nil
}

// loadAllSpace loads the free space of every block group, for the
// operations that weigh all of them (resizes, the v1 conversion).
func (t *Txn) loadAllSpace() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fs.space.LoadAll()
}

// touch records that the block group holding a changed.
func (t *Txn) touch(a uint64) {
	t.changes++
	if g := t.fs.space.Group(a); g != nil {
		t.touched[g.Start] = true
	}
}
