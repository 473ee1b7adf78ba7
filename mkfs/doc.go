// Package mkfs creates a new btrfs filesystem on one device and fills it.
// Format writes an empty filesystem: the equivalent of a fresh
// `mkfs.btrfs` (btrfs-progs 6.2) with the same options, built from nothing
// with the project's own encoders and the copy-on-write engine of
// internal/ctree. Build formats and then fills the filesystem from a
// Source (a host directory, OpenDir, or a tar stream, NewTarSource)
// through the btrfs.FS write API — the one write path every change takes —
// committing every CommitBytes or CommitEntries, optionally making
// subvolumes of chosen directories, shrinking the result to its last used
// byte, and, when reproducible, deriving every UUID from a hash of the
// input and stamping every time from a fixed clock (docs/design/0007).
// With Reflink, the data of a host directory's files are shared with the
// image file (FICLONERANGE) rather than written, where the host clones
// (docs/design/0012).
// CopyInto runs the same filler against a filesystem that is already open
// (`gobtrfs cp` into an image), with OpenPath as its source for a host
// file or tree.
//
// # What it writes
//
// Three chunks (SYSTEM, METADATA, DATA) with their block groups and dev
// extents, and one leaf for each tree: chunk, root, extent, dev, fs,
// csum, data-reloc, UUID and (by default) free-space and block-group
// trees. The block-group tree is on by default as in mkfs.btrfs 6.19
// (docs/design/0012-mkfs-drop-in.md); with 4 KiB nodes it makes the root
// tree a node over two leaves, as 6.19 does. The superblock
// and every mirror that fits the device carry the same contents apart
// from their own bytenr and checksum. The first MiB is zeroed first, as
// progs does, so no earlier filesystem's signature survives there.
//
// Chunk placement follows mkfs.btrfs 6.2 (docs section 8): SINGLE SYSTEM
// (4 MiB at 1 MiB), SINGLE METADATA (8 MiB at 5 MiB) and SINGLE DATA
// (8 MiB at 13 MiB) sit where progs' bootstrap chunks sit; DUP chunks are
// laid out from 21 MiB on, physically and logically, in the order SYSTEM,
// METADATA, DATA, sized by progs' rules (dupChunkSize). Generations, the
// order of the tree blocks and the odd inode generations progs leaves
// behind are reproduced too, so that `btrfs inspect-internal dump-tree`
// and `dump-super` of both tools agree once uuids, times and block
// addresses are masked (the tests compare them).
//
// Known differences from progs 6.2, all deliberate:
//
//   - Tree blocks are packed at the start of their chunk (the chunk root
//     second in SYSTEM, as progs puts it), where progs leaves holes behind
//     from its temporary trees; so block addresses and the free-space
//     tree's free extents differ.
//   - No stale free-space-tree entries for progs' deleted bootstrap
//     groups, and only the backup-root slot of the final generation is
//     filled (progs leaves three stale ones).
//   - Without the free-space tree, cache_generation is 0 (no persistent
//     free-space cache), where progs asks for the v1 cache with -1.
//   - Sizes just under progs' minimum are accepted when the chunks fit.
//   - The block-group tree (a 6.19 default 6.2 cannot make) is placed
//     after the free-space tree; with ^block-group-tree the images equal
//     6.2's as above.
//
// Invariants of Format:
//
//   - Every tree is a single leaf but the root tree, whose blocks are
//     planned by building it once (planRootTree); the store refuses any
//     block not planned, so a layout that does not fit fails instead of
//     spreading.
//   - Extent tree, block-group used, free-space tree, device bytes_used
//     and super bytes_used are computed from one list of tree blocks, so
//     they cannot disagree.
//   - Reproducible formats derive every UUID from Options.Seed and take
//     every time stamp from Options.Time: same inputs, same bytes.
//
// # What it must never do
//
// Build never writes an entry the input does not describe, never follows
// a symlink of the input, and never stores what it cannot represent (a
// name over 255 bytes, a symlink target too long for the node size): it
// stops with ErrInput naming the path, before writing anything when the
// input can be read twice (PrePass). Format never writes outside [0, Size) of the device apart from zeroing
// stale superblock copies past Size, never puts a tree block where a
// superblock copy lives, and never creates features it
// cannot build consistently (mixed block groups, RAID profiles, zoned,
// quotas, extent tree v2): those names are refused.
package mkfs
