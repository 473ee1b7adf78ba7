package ctree

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Params are the filesystem-wide facts every block the engine writes
// carries in its header.
type Params struct {
	NodeSize      int       // 4096 to 65536, a power of two
	FSID          disk.UUID // fsid (or metadata_uuid) stamped in every header
	ChunkTreeUUID disk.UUID // chunk_tree_uuid stamped in every header
}

// Store is the block layer the engine runs over: the in-memory MemStore in
// tests and benchmarks, the transaction layer on real images. It is defined
// here, by its consumer, and kept small.
//
// The kernel's "mark dirty" is engine-side: the running Trans keeps the set
// of private blocks and hands each to Write when it writes them out, which
// is when the checksum is computed (by the store) and the WRITTEN header
// flag is set (by the engine).
type Store interface {
	// Reader reads committed blocks, verified against the parent's
	// expectations. The engine never changes the bytes it returns.
	Reader
	// Params returns the node size and identifiers of the filesystem.
	Params() Params
	// Alloc returns the address of a new nodesize block for tree owner at
	// level, preferably near hint.
	Alloc(owner disk.ObjectID, level int, hint disk.LogicalAddr) (disk.LogicalAddr, error)
	// Free hands back a block no tree points to any more. reuse is true
	// when the block was created in the running transaction and never
	// written: its address may be handed out again at once. Otherwise the
	// last committed tree may still point at it, so the store must keep it
	// (pinned) until the transaction commits.
	Free(addr disk.LogicalAddr, reuse bool)
	// Write writes out a block at addr: the store computes its checksum
	// into the first bytes of block and keeps (or writes) the block. The
	// engine does not change block afterwards, so a store may keep the
	// slice without copying it.
	Write(addr disk.LogicalAddr, block []byte) error
}

// SharedStore is a Store whose subvolume trees may share blocks
// (snapshots). Before the engine copies a block of such a tree that is
// not private, it calls CopyShared with the block's bytes and the tree
// copying it: the store works out the reference changes the copy makes
// (the old block may stay, reachable from other trees) and reports
// whether it has taken the old block's release on itself (handled: the
// engine then does not call Free for it). An error leaves the block
// uncopied and nothing changed.
type SharedStore interface {
	CopyShared(tree disk.ObjectID, old disk.Node) (handled bool, err error)
}
