package check

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// errRead marks a tree block that could not be read at all (unmapped
// address, I/O error, no copy with a good checksum).
var errRead = errors.New("cannot read tree block")

// ReadBlock implements ctree.Reader: it reads the block at addr from the
// first mirror whose checksum and address are right, and checks it
// against e and the header and layout rules (disk.Node.Check). Verified
// blocks are cached; a cached block is checked against e again.
func (c *checker) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	if n, ok := c.cache.get(addr); ok {
		if err := n.CheckExpect(c.params, e); err != nil {
			return nil, err
		}
		return n, nil
	}
	buf := make([]byte, c.params.NodeSize)
	verify := func(_ disk.LogicalAddr, b []byte) bool {
		return c.params.CsumType.VerifyBlock(b) && disk.Node(b).Bytenr() == addr
	}
	if err := c.rd.ReadLogical(buf, addr, verify); err != nil {
		if why := c.whyBad(addr); why != "" {
			return nil, fmt.Errorf("%w %d: %s", errRead, addr, why)
		}
		return nil, fmt.Errorf("%w %d: %w", errRead, addr, err)
	}
	n := disk.Node(buf)
	if err := n.Check(c.params, e); err != nil {
		return nil, err
	}
	c.cache.put(addr, n)
	return n, nil
}

// blockCache keeps up to max verified blocks. Eviction is arbitrary (Go
// map order): the walks that use it visit each block a few times at most,
// close together, so recency buys little.
type blockCache struct {
	mu  sync.Mutex
	max int
	m   map[disk.LogicalAddr]disk.Node
}

func newBlockCache(max int) *blockCache {
	if max < 64 {
		max = 64
	}
	return &blockCache{max: max, m: make(map[disk.LogicalAddr]disk.Node)}
}

func (bc *blockCache) get(addr disk.LogicalAddr) (disk.Node, bool) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	n, ok := bc.m[addr]
	return n, ok
}

func (bc *blockCache) put(addr disk.LogicalAddr, n disk.Node) {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if len(bc.m) >= bc.max {
		for k := range bc.m {
			delete(bc.m, k)
			if len(bc.m) < bc.max*7/8 {
				break
			}
		}
	}
	bc.m[addr] = n
}

// whyBad reads the first copy of the tree block at addr as it is and
// says what is wrong with it, in btrfs check's words; "" if it cannot
// tell.
func (c *checker) whyBad(addr disk.LogicalAddr) string {
	mp, err := c.m.Mirrors(addr, uint64(c.params.NodeSize))
	if err != nil || mp.Length < uint64(c.params.NodeSize) || len(mp.Copies) == 0 {
		return ""
	}
	dev, ok := c.set.Devices()[mp.Copies[0].DevID]
	if !ok {
		return ""
	}
	b := make([]byte, c.params.NodeSize)
	if n, _ := dev.ReadAt(b, int64(mp.Copies[0].Physical)); n != len(b) {
		return ""
	}
	if !c.params.CsumType.VerifyBlock(b) {
		size := c.params.CsumType.Size()
		want := append([]byte(nil), b[:size]...)
		got := c.params.CsumType.Sum(nil, b[disk.CsumFieldSize:])
		return fmt.Sprintf("checksum verify failed on %d wanted %x found %x", addr, got, want)
	}
	if have := disk.Node(b).Bytenr(); have != addr {
		return fmt.Sprintf("bad tree block %d, bytenr mismatch, want=%d, have=%d", addr, addr, have)
	}
	return ""
}
