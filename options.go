package btrfs

import "time"

// Options tune Open and OpenWritable (and OpenDevices); a nil *Options is
// the zero value. The zero value reads with default cache sizes, using the
// primary superblock as the kernel does, and writes (OpenWritable) without
// compression, with inline extents up to 2048 bytes, committing in the
// background every 30 seconds and when a transaction holds a tenth of the
// machine's memory.
//
// Devices, CacheBytes and NoDataChecksums apply to both opens;
// SuperFallback only to Open (OpenWritable always starts from the primary
// superblock, which its commits write); the fields from Compress on only
// to OpenWritable, and Open ignores them. An FS opened
// with Open refuses every change with an error matching syscall.EROFS, as
// a read-only mount does, and fs.ErrPermission.
type Options struct {
	// Devices are the other devices of a multi-device filesystem, in any
	// order; they are matched by fsid and devid.
	Devices []string
	// CacheBytes bounds the metadata block cache; 0 means 64 MiB.
	CacheBytes int64
	// NoDataChecksums skips data checksum verification (for salvage). Tree
	// blocks are always verified.
	NoDataChecksums bool
	// SuperFallback mounts from the best mirror superblock of a device
	// whose primary copy is damaged, as btrfs-progs can; the kernel uses
	// only the primary.
	SuperFallback bool
	// NoLogReplay opens a filesystem the kernel left with a log tree (an
	// fsync after the last commit) as of its last commit, like mount -o
	// nologreplay: the fsync'd changes are not shown. Without it, Open
	// shows them (the log is replayed in memory, the image is not
	// written) and OpenWritable replays and commits them first. Only
	// read-only opens take it; OpenWritable refuses it.
	NoLogReplay bool

	// Compress is the compression of file data written through an FS
	// opened with OpenWritable: "" (none), "zlib", "lzo" or "zstd", like
	// the kernel's compress mount option. A piece of data that does not
	// get at least one sector smaller is stored as is, and the file is
	// then marked NOCOMPRESS (unless CompressForce).
	Compress string
	// CompressLevel is the zlib (1..9) or zstd (-15..15) level; 0 means
	// the default (3 for both). LZO has no levels.
	CompressLevel int
	// CompressForce keeps compressing files whose data did not compress
	// before, like compress-force.
	CompressForce bool
	// MaxInline is the largest file (from offset 0, smaller than a
	// sector) kept inside the tree as an inline extent; 0 means 2048,
	// the kernel's max_inline default, and a negative value disables
	// inline extents for file data.
	MaxInline int
	// Now is the clock changes are stamped with (inode and directory
	// times, subvolume creation times); nil means time.Now. Reproducible
	// image builds pass a fixed clock.
	Now func() time.Time

	// CommitInterval is how often a writable FS commits in the
	// background, like the kernel's commit= mount option: a transaction
	// older than this is committed. 0 means 30 seconds, negative never.
	CommitInterval time.Duration
	// DirtyLimit bounds what one transaction holds (file data written
	// plus dirty tree blocks, in bytes): the change that passes it
	// commits before it returns, and other changes wait, so memory stays
	// bounded however much is written. 0 means a tenth of the machine's
	// memory (at least 32 MiB); negative means no limit. With a limit, a
	// data change that finds no space while bytes freed since the last
	// durable commit are pinned also commits and tries again, as the
	// kernel commits to free space before it says ENOSPC; negative means
	// the FS commits only in Commit, Sync, Close and the background
	// (CommitInterval), so Rollback drops exactly what came after them.
	DirtyLimit int64
	// NoPushRightShortcut turns off, in every tree a writable FS changes,
	// the shortcut of "Btrfs: more efficient push_leaf_right" (a key past
	// the end of a full leaf goes to slot 0 of a right neighbour with
	// room). For measurement only (`gobtrfs bench fileio --compare`):
	// both ways make valid filesystems.
	NoPushRightShortcut bool
	// NoTreeLog makes every File.Sync a commit, like the kernel's
	// notreelog mount option. By default an fsync of a file that only
	// data writes changed since the last commit writes a log tree
	// instead (docs/design/0019), which a mount after a crash replays.
	NoTreeLog bool
	// TreeLogRebuild logs every item of an fsynced file again at each
	// fsync, deleting its old ones first, as the kernel of the seed
	// patch's time did, instead of only the items changed since its last
	// log. For measurement only (the shortcut share of such a log tree,
	// `gobtrfs bench fileio --log-rebuild`): both make valid logs.
	TreeLogRebuild bool
}

func (o *Options) cacheBytes() int64 {
	if o.CacheBytes > 0 {
		return o.CacheBytes
	}
	return 64 << 20
}
