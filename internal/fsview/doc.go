// Package fsview gives the module's own tools (dump-tree, info, tests)
// the layers under an open *btrfs.FS: its superblock, verified block
// reader, chunk map and tree roots. These carry internal types, so they
// are not methods of btrfs.FS, whose exported API names public types only
// (docs/design/0014-public-api.md).
//
// Package btrfs registers the accessor in its init; this package sits
// below it and so cannot import it, which is why Of takes any.
package fsview
