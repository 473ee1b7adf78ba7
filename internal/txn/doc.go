// Package txn changes a btrfs filesystem on real devices through
// transactions: trees are edited with the copy-on-write engine of
// internal/ctree, and Commit turns the blocks the engine allocated and freed
// into extent-tree, block-group and free-space-tree items, writes every new
// block and then the superblocks, so that a crash at any point leaves either
// the old or the new commit on disk (docs/design/0004-transactions.md).
//
// # Model
//
// An FS is the open, writable filesystem: the devices, the chunk map, the
// last committed superblock and the free-space model (alloc.Space). At
// most one Txn runs at a time. A Txn implements ctree.Store: blocks the
// engine writes stay in memory until Commit; Alloc takes nodesize-aligned
// space from METADATA groups (SYSTEM for the chunk tree), adding a new
// chunk with the filesystem's profile when they are full (chunkalloc.go);
// Free pins committed blocks until the commit is durable and hands blocks
// born in this transaction straight back. Open reads and verifies the
// chunk tree and the root tree whole; every other tree block is verified
// (checksum, header against its parent pointer, tree-checker rules) when
// a transaction first reads it, and a transaction that meets damage fails
// with disk.ErrCorrupt and is aborted, so nothing is written. A block
// group's free space is loaded from the committed extent tree when an
// allocation or a free first needs it (alloc.LoadLazy): the cost of an
// open does not grow with the filesystem.
//
// Invariants:
//
//   - Nothing reachable from the last committed superblock is overwritten:
//     new blocks go only to bytes alloc.Space reports free, and freed bytes
//     stay pinned until the superblock that no longer needs them is durable.
//   - Commit writes all tree blocks and syncs before it writes any
//     superblock, and syncs again afterwards.
//   - Before the write-out, the extent tree holds exactly one METADATA_ITEM
//     for every live tree block, every touched BLOCK_GROUP_ITEM's used is
//     alloc's Used, and the free-space tree of every touched group equals
//     alloc's FreeSpaceTreeView (the fixpoint of Commit).
//
// # Data
//
// File data (data.go, docs/design/0006-data-extents.md): AllocData
// reserves DATA space (growing a DATA chunk when needed), WriteData
// writes it through to every copy at once, AddDataRef and DropDataRef
// record reference changes that Commit's first settle step turns into
// EXTENT_ITEMs with EXTENT_DATA_REFs (freeing extents whose count reaches
// zero, with their checksums), and AddCsums/DeleteCsums edit the csum
// tree directly. The EXTENT_DATA items themselves are the caller's.
// ReadData reads through the transaction's chunk map (which knows the
// chunks it added); SetIncompat adds superblock feature bits at Commit.
//
// # New trees and shrinking
//
// CreateTree makes an empty tree with its ROOT_ITEM (a new subvolume);
// RootItem and OpenedTrees let the filesystem layer find subvolumes and
// show the trees a transaction changed. Shrink (shrink.go), the last
// change of a transaction, removes empty chunks at the end of a single
// device and cuts the last one to its last used byte, so the caller can
// truncate the image after the commit.
//
// # Measurements
//
// The FS counts for benchmarks (stats.go): the B-tree engine's counters
// per tree id, summed over transactions (each tree a Txn opens counts
// into the FS's Stats for its id as well as into the transaction's),
// commits, and the bytes written to its devices (blockdev.Counted wraps
// each). SetNoPushRightShortcut opens every later tree with the seed
// patch's shortcut off, for comparisons.
//
// # What it must never do
//
// It never writes tree blocks or superblocks before Commit, and writes
// data (WriteData) only into bytes AllocData took from the free space of
// the last commit: an aborted or crashed transaction may leave data there,
// but nothing committed references it, so the filesystem is logically as
// the last commit left it (byte-identical only for transactions without
// data). It never writes degraded or to RAID5/6 metadata, and
// refuses filesystems it cannot keep consistent (extent tree v2, shared
// tree blocks). Without skinny metadata, tree blocks are recorded as
// EXTENT_ITEMs with a tree block info; with mixed block groups, data and
// tree blocks share DATA|METADATA groups and data changes leave a
// metadata reserve (docs/design/0017). A log tree the kernel left is
// read at Open, its blocks pinned and its data extents held out of the
// allocator (logtree.go); the filesystem layer replays it in the first
// transaction, and no commit may drop a log it did not replay
// (docs/design/0016). With the
// block-group tree (compat_ro BLOCK_GROUP_TREE) the BLOCK_GROUP_ITEMs are
// read, inserted, updated and removed in tree 11 instead of the extent
// tree, and tree 11's ROOT_ITEM is kept in step like every opened tree's.
// A filesystem with the v1 space cache is converted by its first commit,
// as the kernel's space_cache=v2 mount does: the cache files go, the
// free-space tree is built and compat_ro FREE_SPACE_TREE(_VALID) set
// (spacecache_v1.go, docs/design/0015-v1-space-cache.md).
package txn
