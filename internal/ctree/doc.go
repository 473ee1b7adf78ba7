// Package ctree is btrfs's copy-on-write B-tree: the engine every tree of
// the filesystem is stored in, faithful to the kernel's fs/btrfs/ctree.c
// (shared docs: ctree-algorithms.md). It also holds the read-only Cursor
// and Walk over committed trees that the read path and the checker use.
//
// # Blocks
//
// Every block the engine writes is a valid btrfs tree block of the store's
// node size (4 KiB to 64 KiB): the 101-byte header (fsid, bytenr, flags
// with the mixed back-reference revision, chunk tree uuid, generation,
// owner, nritems, level), then item headers growing up and item data
// growing down from the end (leaves), or key pointers (nodes). The engine
// works on these bytes directly, as the kernel does: every space
// calculation of the balancing code is the kernel's, in bytes.
//
// # Invariants of a valid tree (checked by Tree.Verify)
//
//   - I1: keys strictly increase inside every block and across siblings.
//   - I2: a node's key at slot i equals the first key of child i; a change
//     of a block's first key is written up the path (fixupLowKeys).
//   - I3: leaf data is packed from the end without gaps or overlaps, item
//     i's data ending where item i-1's begins.
//   - I4: nodes hold 1..NP pointers; only a root leaf may be empty.
//   - I5: a child's level is its parent's minus one.
//   - I6: a pointer's generation equals its child's header generation.
//   - I7: a block is changed only after every block above it on the path
//     was made private to the transaction.
//
// # Copy-on-write
//
// A block is private to the running transaction (Trans) when its
// generation is the transaction's and it has not been written out; only
// then is it changed in place. Any other block is copied on its first
// change: a new address from the Store, the parent's pointer rewritten,
// the old block handed back to the Store (reusable at once if it was
// private, pinned until commit otherwise). The Trans keeps the private
// blocks (the dirty set) and writes them out through the Store, which
// computes the checksums; writing sets the WRITTEN header flag, so a block
// changed after being written is copied again.
//
// # Concurrency
//
// Many goroutines may run operations on the same trees in one Trans. Each
// block has a reader/writer lock, taken top-down with lock coupling as the
// kernel does (ctree-algorithms.md section 9): a descent write-locks the
// levels it may change and read-locks the others, releases ancestors once
// the level below can absorb the change, and never upgrades a lock: it
// releases everything and starts again asking for more write locks.
// Siblings are locked only under their parent's write lock. The root
// pointer is swapped atomically and re-checked after locking. Lock order:
// parent before child; left or right sibling after the parent; the Trans
// table mutex and the Store's own locks are leaves (no block lock is taken
// while holding them). Trans.WriteDirty, Tree.Verify and Tree.Info must
// not run concurrently with operations.
//
// # What this package must never do
//
// Change a block that is not private to the running transaction, or read
// a block except through the Trans table and the Store (so each address
// has one in-memory block and one lock). It knows nothing about item
// payload formats, allocation policy or commit ordering: those belong to
// the layers above.
package ctree
