// Package btrfs reads btrfs filesystems from image files and block devices,
// in pure Go, as the Linux kernel would show them, and (OpenWritable)
// begins to change them: directories, empty files, modes, times and xattrs
// so far, each change in a transaction of internal/txn made durable by
// Commit.
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
//	btrfs              this package: the filesystem
//
// A writable FS reads the state of its last Commit: changes not yet
// committed are not visible through the io/fs methods (docs/design/0005).
//
// This package must never write to a device opened read-only, never trust a
// length read from disk before checking it against what contains it, and
// never panic on anything read from disk.
package btrfs
