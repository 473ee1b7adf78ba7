package mkfs

import (
	"fmt"
	"sort"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// store is the ctree.Store the trees are built in: each tree gets exactly
// the one block address the layout assigned it (the root tree also the
// extra blocks planRootTree found it needs), and written blocks stay in
// memory until Format writes them through the chunk map.
type store struct {
	params ctree.Params
	csum   disk.CsumType
	addrs  map[disk.ObjectID]disk.LogicalAddr
	// extra are the root tree's blocks past addrs[RootTreeObjectID], in
	// the order they are allocated.
	extra []disk.LogicalAddr
	// scratch hands out extra root tree blocks without limit (planRootTree
	// counts them).
	scratch bool
	given   map[disk.ObjectID]int
	levels  map[disk.LogicalAddr]int // level of every block handed out
	blocks  map[disk.LogicalAddr][]byte
}

func newStore(c *config, addrs map[disk.ObjectID]disk.LogicalAddr, extra []disk.LogicalAddr) *store {
	return &store{
		params: ctree.Params{NodeSize: c.nodeSize, FSID: c.fsid, ChunkTreeUUID: c.chunkUUID},
		csum:   c.csum, addrs: addrs, extra: extra,
		given: map[disk.ObjectID]int{}, levels: map[disk.LogicalAddr]int{}, blocks: map[disk.LogicalAddr][]byte{},
	}
}

// Params implements ctree.Store.
func (s *store) Params() ctree.Params { return s.params }

// ReadBlock implements ctree.Reader over the blocks written so far.
func (s *store) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	b, ok := s.blocks[addr]
	if !ok {
		return nil, &disk.CorruptError{Logical: addr, Tree: e.Owner, What: "mkfs: no block written here"}
	}
	n := disk.Node(b)
	if err := n.Check(disk.BlockParams{NodeSize: s.params.NodeSize, CsumType: s.csum, FSID: s.params.FSID}, e); err != nil {
		return nil, err
	}
	return n, nil
}

// Alloc implements ctree.Store: the tree's assigned block, once (the
// root tree: then its extra blocks). A further request means the tree
// outgrew what the layout provides for.
func (s *store) Alloc(owner disk.ObjectID, level int, _ disk.LogicalAddr) (disk.LogicalAddr, error) {
	a, ok := s.addrs[owner]
	if !ok {
		return 0, fmt.Errorf("mkfs: no block planned for tree %s", owner.TreeName())
	}
	n := s.given[owner]
	switch {
	case n == 0:
	case owner == disk.RootTreeObjectID && s.scratch:
		a += disk.LogicalAddr(n * s.params.NodeSize)
	case owner == disk.RootTreeObjectID && n <= len(s.extra):
		a = s.extra[n-1]
	default:
		return 0, fmt.Errorf("mkfs: tree %s does not fit in one leaf", owner.TreeName())
	}
	s.given[owner]++
	s.levels[a] = level
	return a, nil
}

// Free implements ctree.Store. Building only inserts into fresh blocks,
// so nothing is ever freed; a free would mean the tree was reshaped in a
// way the plan did not foresee, and is caught by comparing the levels
// after the build.
func (s *store) Free(a disk.LogicalAddr, _ bool) { s.levels[a] = -1 }

// Write implements ctree.Store: checksum and keep the block.
func (s *store) Write(addr disk.LogicalAddr, block []byte) error {
	if len(block) != s.params.NodeSize {
		return fmt.Errorf("mkfs: block of %d bytes at %d", len(block), addr)
	}
	s.csum.SumBlock(block)
	s.blocks[addr] = block
	return nil
}

// sortedAddrs lists the written blocks in address order.
func (s *store) sortedAddrs() []disk.LogicalAddr {
	out := make([]disk.LogicalAddr, 0, len(s.blocks))
	for a := range s.blocks {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
