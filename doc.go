// Package btrfs reads btrfs filesystems from image files and block devices,
// in pure Go, as the Linux kernel would show them, and (OpenWritable)
// changes them: directories, files and their data, links, special files,
// renames, modes, owners, times, xattrs and subvolumes, each change inside
// a transaction of internal/txn that Commit makes durable. This is the one
// write path: mkfs, the editing commands and (later) FUSE all call it.
//
// Open returns an *FS that implements io/fs.FS, fs.ReadDirFS, fs.ReadFileFS,
// fs.StatFS and fs.ReadLinkFS over the top-level subvolume (id 5), where
// nested subvolumes and snapshots appear as directories where they sit, as a
// kernel mount with subvolid=5 shows them. Other subvolumes open by id or path
// (FS.Subvolume). Open files are io.ReaderAt and io.Seeker and find data and
// holes with SeekData and SeekHole.
//
// Every block and every data sector is verified as it is read: tree blocks
// against their checksum, their parent's pointer and the kernel's
// tree-checker rules, data against the checksum tree (unless the inode is
// NODATASUM). A bad copy falls back to another mirror or to a parity rebuild
// where the profile has one. Corruption yields errors for which
// errors.Is(err, ErrCorrupt) holds and whose text names the place: device
// offset or logical address, tree and key.
//
// A filesystem the kernel left with a log tree (fsync'd changes not yet
// committed) shows those changes, as a mount shows them after replaying
// the log: OpenWritable replays the log into the subvolume trees and
// commits that before anything else; Open replays it into memory, over
// the devices, leaving the image as it is (docs/design/0016).
//
// Concurrency: an FS is safe for use by many goroutines at once; so is an
// open File for ReadAt. Seek and Read on one File share its offset and are
// not meant for concurrent use, as with *os.File.
//
// Layers (each imports only those below it):
//
//	internal/disk      on-disk format
//	internal/blockdev  devices and cache
//	internal/chunk     logical -> physical mapping, mirrors, parity
//	internal/ctree     B-tree: read cursor and the copy-on-write engine
//	internal/alloc     free space; internal/txn transactions
//	btrfs              this package: the filesystem
//
// A writable FS reads every change made so far, committed or not, and is
// safe for many goroutines: reads hold the writer's lock shared and never
// see half a change; changes and commits hold it exclusively; Commit moves
// the read side to the new roots without reopening; Sync gives group
// commit, Options.CommitInterval background commits, Options.DirtyLimit
// bounds a transaction, Close commits and Rollback drops
// (docs/design/0009).
// Each change checks everything it can before it changes anything, so the
// expected errors (*fs.PathError or *os.LinkError wrapping the errno Linux
// gives) leave no trace; a failure after the first change aborts the
// transaction and the FS takes no more changes (ErrAborted).
//
// This package must never write to a device opened read-only, never write
// outside a transaction, never trust a
// length read from disk before checking it against what contains it, and
// never panic on anything read from disk.
package btrfs
