package btrfs

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// logicalReader reads logical ranges with mirror fallback. The range is
// read in pieces that each lie in one stripe element; verify judges one
// copy of a piece (at its logical address), and a copy it rejects is
// replaced by the next mirror or a parity rebuild. verify may be nil.
//
// ReadBlock reads one tree block, which never crosses a stripe element,
// whole: a damaged copy is replaced whole, never sector by sector.
type logicalReader interface {
	ReadLogical(p []byte, logical disk.LogicalAddr, verify chunk.VerifyFunc) error
	ReadBlock(p []byte, logical disk.LogicalAddr, verify func(b []byte) bool) error
}

// blockReader hands out verified tree blocks (ctree.Reader). A block is
// fully verified (checksum, structure, item rules) the first time it is
// read; later readers through other pointers re-check only the header
// against their own expectations.
type blockReader struct {
	lr     logicalReader
	params disk.BlockParams     // immutable; SuperGen is superGen's
	items  disk.ItemCheckParams // immutable; SuperGen is superGen's
	// superGen is the generation checks allow blocks and items up to (one
	// more: the running transaction's): it moves with each commit while
	// reads of published views run (read_view.go).
	superGen atomic.Uint64

	mu    sync.Mutex
	lru   *list.List // of *cachedBlock, most recent first; protected by mu
	index map[disk.LogicalAddr]*list.Element
	max   int // blocks kept
	// pinned are blocks a commit is writing (txn.BlockCache.Put): served
	// from here, outside the budget, until the devices hold them.
	pinned map[disk.LogicalAddr]disk.Node
}

type cachedBlock struct {
	addr disk.LogicalAddr
	node disk.Node
}

func newBlockReader(lr logicalReader, p disk.BlockParams, items disk.ItemCheckParams, cacheBytes int64) *blockReader {
	max := int(cacheBytes / int64(p.NodeSize))
	if max < 16 {
		max = 16
	}
	br := &blockReader{lr: lr, params: p, items: items, lru: list.New(),
		index: make(map[disk.LogicalAddr]*list.Element), max: max}
	br.superGen.Store(uint64(p.SuperGen))
	return br
}

// blockParams returns the block checks' parameters as of now.
func (br *blockReader) blockParams() disk.BlockParams {
	p := br.params
	p.SuperGen = disk.Generation(br.superGen.Load())
	return p
}

// ReadBlock implements ctree.Reader.
func (br *blockReader) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	if n, pinned := br.cached(addr); pinned {
		// The newest block at addr, maybe not on the devices yet.
		if err := n.CheckExpect(br.blockParams(), e); err != nil {
			return nil, err
		}
		return n, nil
	} else if n != nil {
		err := n.CheckExpect(br.blockParams(), e)
		if err == nil {
			return n, nil
		}
		if n.Generation() == e.Generation || e.Generation == 0 {
			return nil, err
		}
		// On a writable FS an address freed by one commit may hold a
		// newer block after a later one: the cached block is stale, not
		// damaged. Read what the device holds now.
		br.forget(addr)
	}
	if uint64(addr)%uint64(br.items.SectorSize) != 0 {
		return nil, &disk.CorruptError{Logical: addr, Tree: e.Owner, What: "tree block address not sector aligned"}
	}
	buf := make([]byte, br.params.NodeSize)
	// Every copy is checked in full (checksum, header, structure, item
	// rules), as the kernel's tree-checker does, so that a copy that is
	// damaged in any way gives way to the next mirror or a rebuild.
	var checkErr error
	verify := func(b []byte) bool {
		checkErr = br.check(disk.Node(b), e)
		return checkErr == nil
	}
	if err := br.lr.ReadBlock(buf, addr, verify); err != nil {
		if checkErr != nil {
			return nil, checkErr
		}
		return nil, fmt.Errorf("read tree block %d (tree %s): %w", addr, e.Owner.TreeName(), err)
	}
	n := disk.Node(buf)
	br.insert(addr, n)
	return n, nil
}

// check runs every read-time check on one copy of a block.
func (br *blockReader) check(n disk.Node, e disk.Expect) error {
	if err := n.Check(br.blockParams(), e); err != nil {
		return err
	}
	if n.IsLeaf() {
		ip := br.items
		ip.SuperGen = disk.Generation(br.superGen.Load())
		ip.Tree = n.Owner()
		if err := disk.CheckLeafItems(n, ip); err != nil {
			return locate(err, e.Bytenr, n.Owner())
		}
	}
	return nil
}

// locate fills the block address and tree into a corruption error that
// knows only the key.
func locate(err error, addr disk.LogicalAddr, tree disk.ObjectID) error {
	if ce, ok := err.(*disk.CorruptError); ok {
		c := *ce
		if c.Logical == 0 {
			c.Logical = addr
		}
		if c.Tree == 0 {
			c.Tree = tree
		}
		return &c
	}
	return err
}

// cached returns the block held for addr, if any, and whether it is
// pinned (Put, not yet Unpin).
func (br *blockReader) cached(addr disk.LogicalAddr) (n disk.Node, pinned bool) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if n, ok := br.pinned[addr]; ok {
		return n, true
	}
	if el, ok := br.index[addr]; ok {
		br.lru.MoveToFront(el)
		return el.Value.(*cachedBlock).node, false
	}
	return nil, false
}

// forget drops one cached block.
func (br *blockReader) forget(addr disk.LogicalAddr) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if el, ok := br.index[addr]; ok {
		br.lru.Remove(el)
		delete(br.index, addr)
	}
}

// setGeneration moves the checks to a new commit: blocks and items of
// generations up to gen are valid. Called with the writer's lock held
// exclusively; reads of published views run meanwhile, hence the atomic.
func (br *blockReader) setGeneration(gen disk.Generation) {
	br.superGen.Store(uint64(gen))
}

// Put implements txn.BlockCache: a block the write side is writing at
// addr replaces whatever was cached there, and stays (outside the LRU
// budget) until Unpin says the devices hold it.
func (br *blockReader) Put(addr disk.LogicalAddr, n disk.Node) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if el, ok := br.index[addr]; ok {
		br.lru.Remove(el)
		delete(br.index, addr)
	}
	if br.pinned == nil {
		br.pinned = make(map[disk.LogicalAddr]disk.Node)
	}
	br.pinned[addr] = n
}

// Drop implements txn.BlockCache: the blocks at addrs are forgotten.
func (br *blockReader) Drop(addrs []disk.LogicalAddr) {
	br.mu.Lock()
	defer br.mu.Unlock()
	for _, a := range addrs {
		delete(br.pinned, a)
		if el, ok := br.index[a]; ok {
			br.lru.Remove(el)
			delete(br.index, a)
		}
	}
}

// Unpin implements txn.BlockCache: the blocks move to the LRU list.
func (br *blockReader) Unpin(addrs []disk.LogicalAddr) {
	br.mu.Lock()
	defer br.mu.Unlock()
	for _, a := range addrs {
		n, ok := br.pinned[a]
		if !ok {
			continue
		}
		delete(br.pinned, a)
		if _, ok := br.index[a]; !ok {
			br.index[a] = br.lru.PushFront(&cachedBlock{a, n})
		}
	}
	br.trim()
}

func (br *blockReader) insert(addr disk.LogicalAddr, n disk.Node) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if _, ok := br.index[addr]; ok {
		return
	}
	br.index[addr] = br.lru.PushFront(&cachedBlock{addr, n})
	br.trim()
}

// trim drops the least recently used blocks over the budget. Preconditions:
// br.mu is held.
func (br *blockReader) trim() {
	for br.lru.Len() > br.max {
		old := br.lru.Back()
		br.lru.Remove(old)
		delete(br.index, old.Value.(*cachedBlock).addr)
	}
}
