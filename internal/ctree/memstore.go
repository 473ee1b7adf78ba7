package ctree

import (
	"fmt"
	"sync"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// MemStore is a Store in memory: a map from address to written block bytes,
// a bump allocator with a free list, and pinning of freed committed blocks
// until Commit. Tests and the benchmark use it. It is safe for concurrent
// use.
type MemStore struct {
	params Params
	csum   disk.CsumType

	mu      sync.Mutex
	blocks  map[disk.LogicalAddr][]byte // written blocks; protected by mu
	live    map[disk.LogicalAddr]bool   // allocated and not freed; protected by mu
	next    disk.LogicalAddr            // bump pointer; protected by mu
	free    []disk.LogicalAddr          // reusable addresses; protected by mu
	pinned  []disk.LogicalAddr          // freed, reusable after Commit; protected by mu
	written int64                       // blocks written; protected by mu
	gen     disk.Generation             // generation of the last commit; protected by mu
}

// MemStoreBase is the first address MemStore hands out: the start of the
// first metadata chunk mkfs.btrfs 6.2 creates, for realistic addresses.
const MemStoreBase disk.LogicalAddr = 30408704

// NewMemStore returns an empty store for blocks of p.NodeSize bytes with
// crc32c checksums.
func NewMemStore(p Params) *MemStore {
	if p.NodeSize < 4096 || p.NodeSize > 65536 || p.NodeSize&(p.NodeSize-1) != 0 {
		panic(fmt.Sprintf("ctree: invalid node size %d", p.NodeSize))
	}
	base := (MemStoreBase + disk.LogicalAddr(p.NodeSize) - 1) &^ disk.LogicalAddr(p.NodeSize-1)
	return &MemStore{params: p, csum: disk.CsumCRC32C, blocks: map[disk.LogicalAddr][]byte{},
		live: map[disk.LogicalAddr]bool{}, next: base}
}

// Params implements Store.
func (m *MemStore) Params() Params { return m.params }

// BlockParams returns the parameters blocks are checked against on read.
func (m *MemStore) BlockParams() disk.BlockParams {
	return disk.BlockParams{NodeSize: m.params.NodeSize, CsumType: m.csum, FSID: m.params.FSID}
}

// ReadBlock implements Reader: the written block at addr, checked as a
// reader of a real image would check it.
func (m *MemStore) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	m.mu.Lock()
	b, ok := m.blocks[addr]
	m.mu.Unlock()
	if !ok {
		return nil, &disk.CorruptError{Logical: addr, Tree: e.Owner, What: "no block written at this address"}
	}
	n := disk.Node(b)
	if err := n.Check(m.BlockParams(), e); err != nil {
		return nil, err
	}
	return n, nil
}

// Alloc implements Store: a freed address if one is reusable, else the
// next one.
func (m *MemStore) Alloc(owner disk.ObjectID, level int, hint disk.LogicalAddr) (disk.LogicalAddr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var a disk.LogicalAddr
	if n := len(m.free); n > 0 {
		a = m.free[n-1]
		m.free = m.free[:n-1]
	} else {
		a = m.next
		m.next += disk.LogicalAddr(m.params.NodeSize)
	}
	m.live[a] = true
	return a, nil
}

// Free implements Store. Freeing an address that is not allocated is a bug
// in the engine and panics.
func (m *MemStore) Free(addr disk.LogicalAddr, reuse bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live[addr] {
		panic(fmt.Sprintf("ctree: MemStore: free of unallocated block %d", addr))
	}
	delete(m.live, addr)
	if reuse {
		if _, ok := m.blocks[addr]; ok {
			panic(fmt.Sprintf("ctree: MemStore: block %d freed for reuse but was written", addr))
		}
		m.free = append(m.free, addr)
		return
	}
	m.pinned = append(m.pinned, addr)
}

// Write implements Store: checksum the block and keep it.
func (m *MemStore) Write(addr disk.LogicalAddr, block []byte) error {
	if len(block) != m.params.NodeSize {
		return fmt.Errorf("ctree: MemStore: write of %d bytes at %d, node size %d", len(block), addr, m.params.NodeSize)
	}
	m.csum.SumBlock(block)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live[addr] {
		return fmt.Errorf("ctree: MemStore: write to unallocated block %d", addr)
	}
	m.blocks[addr] = block
	m.written++
	return nil
}

// Commit ends a transaction: the blocks freed in it are no longer
// referenced by any committed tree, so their addresses become reusable.
func (m *MemStore) Commit(gen disk.Generation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.pinned {
		delete(m.blocks, a)
		m.free = append(m.free, a)
	}
	m.pinned = m.pinned[:0]
	m.gen = gen
}

// Written returns the number of blocks written so far.
func (m *MemStore) Written() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.written
}

// Live returns the number of allocated, not freed blocks.
func (m *MemStore) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}
