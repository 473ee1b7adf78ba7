// Package probe tells what a device or image file holds by the magic
// numbers of common filesystems, partition tables and containers, so
// that a command can say "ext4 filesystem, not btrfs" instead of
// "corrupt", and mkfs can refuse a target that holds something else.
//
// The checks follow the on-disk formats' documentation (and what blkid
// looks at); they read a few blocks at fixed offsets and never decide
// from content alone.
package probe
