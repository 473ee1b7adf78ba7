package ctree

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Reader gives verified tree blocks: the block at addr, checked against the
// filesystem parameters and against e (checksum, bytenr, fsid, level,
// generation, owner, first key, item bounds). Implementations cache as they
// like; a returned Node must not change afterwards.
type Reader interface {
	ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error)
}

// Root locates a tree's root block, as a ROOT_ITEM or the superblock says.
type Root struct {
	Addr       disk.LogicalAddr
	Level      int
	Generation disk.Generation
	Owner      disk.ObjectID
}

// sharedOwner reports whether blocks of tree id may be owned by another
// tree: subvolume trees share blocks after snapshots.
func sharedOwner(id disk.ObjectID) bool {
	return id == disk.FSTreeObjectID || (id >= disk.FirstFreeObjectID && id <= disk.LastFreeObjectID) ||
		id == disk.DataRelocTreeObjectID || id == disk.TreeRelocObjectID
}

func (r Root) expect() disk.Expect {
	return disk.Expect{Bytenr: r.Addr, Level: r.Level, Generation: r.Generation, Owner: r.Owner, OwnerAny: sharedOwner(r.Owner)}
}

// childExpect is what node n's pointer i promises about the child.
func childExpect(n disk.Node, i int, owner disk.ObjectID) disk.Expect {
	kp := n.KeyPtr(i)
	k := kp.Key
	return disk.Expect{Bytenr: kp.BlockPtr, Level: n.Level() - 1, Generation: kp.Generation,
		Owner: owner, OwnerAny: sharedOwner(owner), FirstKey: &k}
}

// Cursor iterates the items of a committed, read-only tree. It holds the
// path from the root to the current leaf. A Cursor is not safe for
// concurrent use; many cursors may share one Reader.
type Cursor struct {
	r     Reader
	root  Root
	nodes [disk.MaxLevel]disk.Node
	slots [disk.MaxLevel]int
	valid bool
}

// NewCursor returns a cursor over the tree at root, positioned nowhere.
func NewCursor(r Reader, root Root) *Cursor { return &Cursor{r: r, root: root} }

// descend loads the path for key k: at every level the last slot whose key
// is <= k (slot 0 if none). In the leaf the slot is the first item >= k.
func (c *Cursor) descend(k disk.Key) error {
	if c.root.Level < 0 || c.root.Level >= disk.MaxLevel {
		return disk.Corruptf("tree %s: root level %d", c.root.Owner.TreeName(), c.root.Level)
	}
	n, err := c.r.ReadBlock(c.root.Addr, c.root.expect())
	if err != nil {
		return err
	}
	for {
		lvl := n.Level()
		c.nodes[lvl] = n
		if lvl == 0 {
			c.slots[0] = lowerBound(n, k)
			return nil
		}
		s := lowerBound(n, k)
		if s == n.NumItems() || n.Key(s) != k {
			s--
		}
		if s < 0 {
			s = 0
		}
		c.slots[lvl] = s
		if n, err = c.r.ReadBlock(n.KeyPtr(s).BlockPtr, childExpect(n, s, c.root.Owner)); err != nil {
			return err
		}
	}
}

// lowerBound returns the first slot whose key is >= k.
func lowerBound(n disk.Node, k disk.Key) int {
	lo, hi := 0, n.NumItems()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if n.Key(m).Less(k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Seek positions the cursor at the first item with key >= k. ok is false
// when there is none.
func (c *Cursor) Seek(k disk.Key) (ok bool, err error) {
	c.valid = false
	if err := c.descend(k); err != nil {
		return false, err
	}
	if c.slots[0] < c.nodes[0].NumItems() {
		c.valid = true
		return true, nil
	}
	return c.nextLeaf()
}

// SeekLE positions the cursor at the last item with key <= k. ok is false
// when there is none.
func (c *Cursor) SeekLE(k disk.Key) (ok bool, err error) {
	c.valid = false
	if err := c.descend(k); err != nil {
		return false, err
	}
	leaf := c.nodes[0]
	if c.slots[0] < leaf.NumItems() && leaf.Key(c.slots[0]) == k {
		c.valid = true
		return true, nil
	}
	return c.Prev()
}

// First positions the cursor at the smallest item.
func (c *Cursor) First() (bool, error) { return c.Seek(disk.Key{}) }

// Last positions the cursor at the largest item.
func (c *Cursor) Last() (bool, error) { return c.SeekLE(disk.MaxKey) }

// Next moves to the following item.
func (c *Cursor) Next() (ok bool, err error) {
	if c.nodes[0] == nil {
		return false, nil
	}
	c.slots[0]++
	if c.slots[0] < c.nodes[0].NumItems() {
		c.valid = true
		return true, nil
	}
	return c.nextLeaf()
}

// nextLeaf moves to slot 0 of the next non-empty leaf.
func (c *Cursor) nextLeaf() (bool, error) {
	c.valid = false
	lvl := 1
	for ; lvl <= c.root.Level; lvl++ {
		if c.slots[lvl]+1 < c.nodes[lvl].NumItems() {
			break
		}
	}
	if lvl > c.root.Level {
		c.slots[0] = c.nodes[0].NumItems()
		return false, nil
	}
	c.slots[lvl]++
	for ; lvl > 0; lvl-- {
		n := c.nodes[lvl]
		s := c.slots[lvl]
		child, err := c.r.ReadBlock(n.KeyPtr(s).BlockPtr, childExpect(n, s, c.root.Owner))
		if err != nil {
			return false, err
		}
		c.nodes[lvl-1] = child
		c.slots[lvl-1] = 0
	}
	if c.nodes[0].NumItems() == 0 {
		return c.nextLeaf()
	}
	c.valid = true
	return true, nil
}

// Prev moves to the preceding item.
func (c *Cursor) Prev() (ok bool, err error) {
	if c.nodes[0] == nil {
		return false, nil
	}
	if c.slots[0] > 0 {
		c.slots[0]--
		c.valid = true
		return true, nil
	}
	c.valid = false
	lvl := 1
	for ; lvl <= c.root.Level; lvl++ {
		if c.slots[lvl] > 0 {
			break
		}
	}
	if lvl > c.root.Level {
		return false, nil
	}
	c.slots[lvl]--
	for ; lvl > 0; lvl-- {
		n := c.nodes[lvl]
		s := c.slots[lvl]
		child, err := c.r.ReadBlock(n.KeyPtr(s).BlockPtr, childExpect(n, s, c.root.Owner))
		if err != nil {
			return false, err
		}
		c.nodes[lvl-1] = child
		c.slots[lvl-1] = child.NumItems() - 1
		if lvl-1 == 0 {
			break
		}
	}
	if c.slots[0] < 0 {
		c.slots[0] = 0
		return c.Prev()
	}
	c.valid = true
	return true, nil
}

// Valid reports whether the cursor is on an item.
func (c *Cursor) Valid() bool { return c.valid }

// Key returns the current item's key. Preconditions: Valid().
func (c *Cursor) Key() disk.Key { return c.nodes[0].Key(c.slots[0]) }

// Data returns the current item's payload, a slice of the cached block that
// stays valid (and must not be modified) after the cursor moves.
// Preconditions: Valid().
func (c *Cursor) Data() []byte { return c.nodes[0].ItemData(c.slots[0]) }

// Leaf returns the current leaf block.
func (c *Cursor) Leaf() disk.Node { return c.nodes[0] }

// Slot returns the current slot in the leaf.
func (c *Cursor) Slot() int { return c.slots[0] }

// Walk calls fn for every block of the tree in pre-order (a node before its
// children, children left to right), with the block's depth from the root.
// A block that fails to read stops the walk with its error, wrapped with
// the path to it.
func Walk(r Reader, root Root, fn func(n disk.Node, depth int) error) error {
	n, err := r.ReadBlock(root.Addr, root.expect())
	if err != nil {
		return err
	}
	return walk(r, n, root.Owner, 0, fn)
}

func walk(r Reader, n disk.Node, owner disk.ObjectID, depth int, fn func(disk.Node, int) error) error {
	if err := fn(n, depth); err != nil {
		return err
	}
	if n.IsLeaf() {
		return nil
	}
	for i := 0; i < n.NumItems(); i++ {
		child, err := r.ReadBlock(n.KeyPtr(i).BlockPtr, childExpect(n, i, owner))
		if err != nil {
			return fmt.Errorf("child %d of block %d: %w", i, n.Bytenr(), err)
		}
		if err := walk(r, child, owner, depth+1, fn); err != nil {
			return err
		}
	}
	return nil
}
