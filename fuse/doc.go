// Package fuse shows a btrfs filesystem through FUSE (go-fuse v2), read-only
// or read-write: `gobtrfs mount` is this package behind a command line.
//
// It is built on the btrfs package's public API only (btrfs.FS and
// btrfs.File), which it proves sufficient for a POSIX filesystem: every
// FUSE request becomes one or a few calls of it, by inode number where the
// API offers it (getattr, lookup, open, readdir, and reads and writes of
// open files) and by path for changes (go-fuse's tree of nodes follows
// renames and gives each node its path). It never writes
// anything but through those calls, and caches no attributes and no data
// read: the kernel does (entry and attribute timeouts, page cache kept
// across opens), which is safe because the mount is the only writer of the
// image (docs/design/0011-fuse-mount.md). The one thing it holds back is
// small writes (gather_linux.go): an inode's are put into the filesystem
// as one File.WriteAtMany before any request that can see its data or
// size, and at close, fsync and after a short delay.
//
// Inode numbers are the filesystem's for the subvolume at the mount point
// and made unique for the others (inoMap). An open file whose last name
// goes is kept alive in a hidden directory until closed (orphan_linux.go).
// Errors map to errno in one place (errno.go).
//
// Mount is Linux only; ParseOptions builds everywhere.
package fuse
