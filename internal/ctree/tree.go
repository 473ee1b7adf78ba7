package ctree

import (
	"fmt"
	"sync/atomic"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Options change how a Tree balances. The zero value is the kernel's
// behaviour.
type Options struct {
	// NoPushRightShortcut turns off the seed patch ("Btrfs: more efficient
	// push_leaf_right"): with it set, an append into a full leaf always
	// goes through the ordinary push. For measurement only.
	NoPushRightShortcut bool
	// Stats receives the tree's own counters, as well as the Trans's
	// Stats that count every tree of the transaction. A Tree lives for
	// one transaction in the layers above, so they keep one Stats per
	// tree id and hand it to every Open to count per tree across
	// transactions. nil gives the tree a fresh Stats of its own.
	Stats *Stats
}

// Tree is one copy-on-write B-tree (a btrfs root): its root block, owner id
// and options. A Tree lives across transactions; every operation takes the
// running Trans. Operations on one Tree may run concurrently in one
// transaction.
type Tree struct {
	owner disk.ObjectID // immutable
	opts  Options       // immutable
	stats *Stats        // immutable: opts.Stats, or the tree's own

	// root is the current root block. It changes when the root is copied,
	// when the tree grows a level and when it shrinks one; it is replaced
	// only while the old root is write-locked, and readers lock what they
	// loaded and check it is still the root (ctree-algorithms.md 9.2).
	root atomic.Pointer[block]

	// blocks is the number of blocks this Tree gained (new leaves,
	// nodes, roots and copies) less those it lost (freed, or released
	// to a SharedStore) since it was created or opened: a copy on write
	// counts +1 -1, so over a transaction it is the change in the
	// number of blocks the tree reaches (ROOT_ITEM bytes_used).
	blocks atomic.Int64
}

// NetBlocks returns the blocks the tree gained less those it lost since
// this Tree was created, opened or copied (CopyRoot counts its new root).
func (t *Tree) NetBlocks() int64 { return t.blocks.Load() }

// Create makes an empty tree for owner: one empty root leaf in tx.
func Create(tx *Trans, owner disk.ObjectID, opts Options) (*Tree, error) {
	t := newTree(owner, opts)
	b, err := tx.newBlock(t, 0, 0)
	if err != nil {
		return nil, err
	}
	b.mu.Unlock()
	t.root.Store(b)
	return t, nil
}

// newTree is a Tree without its root yet.
func newTree(owner disk.ObjectID, opts Options) *Tree {
	t := &Tree{owner: owner, opts: opts, stats: opts.Stats}
	if t.stats == nil {
		t.stats = new(Stats)
	}
	return t
}

// Open returns the tree whose committed root is r, reading the root block
// through tx.
func Open(tx *Trans, r Root, opts Options) (*Tree, error) {
	if r.Level < 0 || r.Level >= disk.MaxLevel {
		return nil, disk.Corruptf("tree %s: root level %d", r.Owner.TreeName(), r.Level)
	}
	b, err := tx.lookup(r.expect())
	if err != nil {
		return nil, fmt.Errorf("read root of tree %s: %w", r.Owner.TreeName(), err)
	}
	t := newTree(r.Owner, opts)
	t.root.Store(b)
	return t, nil
}

// Owner returns the tree id stamped in the tree's blocks.
func (t *Tree) Owner() disk.ObjectID { return t.owner }

// Options returns the options the tree was made with.
func (t *Tree) Options() Options { return t.opts }

// Stats returns the counters of this tree's operations: Options.Stats
// when it was set.
func (t *Tree) Stats() *Stats { return t.stats }

// Root returns where the tree's root block is now, for a ROOT_ITEM or the
// superblock. The block is only durable once it has been written.
func (t *Tree) Root() Root {
	b := t.readLockRoot()
	defer b.mu.RUnlock()
	return Root{Addr: b.addr, Level: b.level(), Generation: b.generation(), Owner: t.owner}
}

// readLockRoot returns the root block read-locked, retrying while the root
// changes between loading and locking it.
func (t *Tree) readLockRoot() *block {
	for {
		b := t.root.Load()
		b.mu.RLock()
		if t.root.Load() == b {
			return b
		}
		b.mu.RUnlock()
	}
}

// writeLockRoot is readLockRoot with a write lock.
func (t *Tree) writeLockRoot() *block {
	for {
		b := t.root.Load()
		b.lockW()
		if t.root.Load() == b {
			return b
		}
		b.mu.Unlock()
	}
}

// lockRoot locks the root for a descent that write-locks levels up to wll:
// read-locked first, switched to a write lock if its level is within the
// budget (the lock is never upgraded in place).
func (t *Tree) lockRoot(wll int) (*block, lockState) {
	if wll < disk.MaxLevel {
		b := t.readLockRoot()
		if b.level() > wll {
			return b, readLocked
		}
		b.mu.RUnlock()
	}
	return t.writeLockRoot(), writeLocked
}

// readChild returns the child at slot of node n, checked against what n's
// pointer promises. It does not lock the child.
func (t *Tree) readChild(tx *Trans, n *block, slot int) (*block, error) {
	kp := n.node().KeyPtr(slot)
	k := kp.Key
	return tx.lookup(disk.Expect{Bytenr: kp.BlockPtr, Level: n.level() - 1, Generation: kp.Generation,
		Owner: t.owner, OwnerAny: sharedOwner(t.owner), FirstKey: &k})
}

// cowBlock copies b, which must be write-locked and not private, and
// links the copy where b was: in parent at pslot (parent write-locked and
// private, I7) or as the tree's root when parent is nil. b is freed and
// unlocked; the copy is returned write-locked. Mirrors btrfs_force_cow_block.
func (t *Tree) cowBlock(tx *Trans, b, parent *block, pslot int) (*block, error) {
	nb, err := tx.copyBlock(t, b)
	if err != nil {
		return nil, err
	}
	// A block of a subvolume tree may be shared with snapshots: the
	// store decides what copying it does to the references, and
	// whether the old block goes. When it refuses, the copy is
	// dropped and nothing has changed.
	handled := false
	if ss, ok := tx.store.(SharedStore); ok && sharedOwner(t.owner) {
		if handled, err = ss.CopyShared(t.owner, b.node()); err != nil {
			tx.free(t, nb)
			nb.mu.Unlock()
			return nil, err
		}
	}
	if parent == nil {
		if t.root.Load() != b {
			panic(fmt.Sprintf("ctree: COW of block %d without a parent, but it is not the root", b.addr))
		}
		t.root.Store(nb)
	} else {
		if parent.ptrAddr(pslot) != b.addr || !tx.private(parent) {
			panic(fmt.Sprintf("ctree: COW of block %d: parent %d slot %d points at %d (private %v)",
				b.addr, parent.addr, pslot, parent.ptrAddr(pslot), tx.private(parent)))
		}
		parent.setPtr(pslot, parent.ptrKey(pslot), nb.addr, tx.gen)
	}
	if handled {
		tx.forget(t, b)
	} else {
		tx.free(t, b)
	}
	b.mu.Unlock()
	tx.stats.BlocksCowed.Add(1)
	t.stats.BlocksCowed.Add(1)
	return nb, nil
}

// cowIfNeeded copies b unless it is private already; see cowBlock.
func (t *Tree) cowIfNeeded(tx *Trans, b, parent *block, pslot int) (*block, error) {
	if tx.private(b) {
		return b, nil
	}
	return t.cowBlock(tx, b, parent, pslot)
}
