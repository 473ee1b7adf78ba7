// Package alloc is the in-memory model of free space that the transaction
// layer allocates from: per block group, which logical bytes are free,
// exactly as the extent tree and the free-space tree describe them.
//
// # Model
//
// Extents is an ordered set of bytes stored as maximal, disjoint,
// non-adjacent [start, end) ranges (sorted slice, binary search).
//
// Space holds every block group (BLOCK_GROUP_ITEM, matched 1:1 against the
// chunk map) and a filesystem-wide pinned set. For each group the logical
// range [Start, Start+Length) is partitioned into four disjoint parts:
//
//   - extents: EXTENT_ITEM (length = key offset) and METADATA_ITEM
//     (length = nodesize) items of the extent tree, plus what Alloc handed
//     out since Load;
//   - Excluded: gaps that map onto a superblock copy, or lie below logical
//     64 KiB (chunk.Chunk.SuperblockExclusions); never allocated;
//   - pinned: bytes given back by Free and not yet Unpin'ed; the last
//     committed trees may still reference them, so they must not be
//     reused before the next superblock is durable;
//   - Free: everything else, the only bytes Alloc hands out.
//
// Invariants kept by every method:
//
//   - Used == Length - Free.Bytes() - Excluded.Bytes() - pinned bytes in
//     the group (on a consistent image at Load, Used equals the sum of the
//     extents inside the group, as btrfs check demands);
//   - FreeSpaceTreeView(g) = Free ∪ Excluded ∪ pinned∩g is what the
//     free-space tree must record for g after the running transaction
//     commits: the FST does not know about superblock exclusions, and a
//     freed extent is gone from the extent tree in the same transaction;
//   - Alloc is first fit in ascending logical order over the groups of the
//     requested type (mixed groups serve both data and metadata); tree
//     blocks (METADATA, SYSTEM) never cross a 64 KiB stripe boundary of
//     their chunk.
//
// # Loading
//
// LoadFrom reads every block group and every extent item at once.
// LoadLazy reads only the block groups (a search per chunk, or the small
// block-group tree) and loads a group's Free and Excluded from the extent
// items inside it the first time a method needs them (Alloc skips a group
// whose FreeBytes cannot hold the request without loading it): the
// transaction layer's open then costs the same on any size of filesystem.
// A group is loaded before its first change, so the committed extent tree
// describes it when it is read; the checks are LoadFrom's, per group (an
// extent item outside every group is never met, as nothing is allocated
// there).
//
// LoadFreeSpaceTree decodes a free-space tree (FREE_SPACE_INFO plus
// FREE_SPACE_EXTENT or FREE_SPACE_BITMAP items) on its own, validating
// extent_count and the bitmaps flag; CompareFreeSpaceTree checks it against
// a Space. Entries without a block group are tolerated (mkfs.btrfs 6.2
// leaves two for its temporary chunks).
//
// # What it must never do
//
// It never writes anything and never decides policy beyond first fit: no
// chunk allocation, no tree updates; the transaction layer turns Alloc and
// Free into extent-tree, block-group and FST items. Bytes read from disk
// that break the rules above produce errors wrapping disk.ErrCorrupt, never
// panics. A Space is not safe for concurrent use.
package alloc
