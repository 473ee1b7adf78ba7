// Package check verifies a whole btrfs filesystem, as `btrfs check
// --readonly` does: superblock and root items, every tree block, the
// extent tree's references against the trees that make them, block
// groups and device extents against chunks, the free-space tree, the fs
// trees (inodes, names, file extents), the csum tree and, on request,
// every data sector's checksum.
//
// Invariants:
//
//   - check never writes. It opens the devices read-only and imports only
//     the read side (internal/disk, blockdev, chunk, ctree); it cannot
//     import internal/txn or internal/alloc (internal/layers enforces it),
//     so it cannot write by construction.
//   - check re-derives every fact from the trees that make it (reference
//     counts from pointers and file extents, nlink from names, free space
//     from extents) instead of calling the code it checks.
//   - A damaged image is data, not a failure: each problem goes into the
//     Report once. Run returns an error only when it cannot run at all
//     (no device, no superblock, no chunk map), and such errors satisfy
//     errors.Is(err, disk.ErrCorrupt) when the image is to blame.
//   - Hostile input never panics, hangs or over-allocates: every length
//     read from disk is bounded by the block it came from, every walk
//     visits a block at most once per tree and stops at disk.MaxLevel.
//
// The phases and their order follow btrfs check (docs/design/0020-check.md).
package check
