package btrfs

import (
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// ErrCorrupt is matched (errors.Is) by every error caused by damaged or
// invalid on-disk data.
var ErrCorrupt = disk.ErrCorrupt

// ErrMissingDevice is matched when a read needed a device that was not
// given and no other copy or parity could serve it.
var ErrMissingDevice = chunk.ErrDeviceMissing

// ErrUnsupported is returned for filesystems and changes gobtrfs cannot
// handle (yet) without risking the image, such as shrinking a
// multi-device filesystem. Nothing is changed.
var ErrUnsupported = txn.ErrUnsupported

// ErrLocked is matched when OpenWritable (or mkfs) is refused because the
// image or one of its devices is already open for writing, by this
// process or another: two writers would overwrite each other's commits.
// Readers (Open) are never refused. The message names the path.
var ErrLocked = blockdev.ErrLocked

// ErrMounted is matched when OpenWritable (or mkfs) is refused because
// the kernel has the filesystem mounted (Linux: the block device, or a
// loop device attached to the image file): the kernel would not see the
// changes, and its own commits would overwrite them. The message names
// the mount point and the loop device when they can be found. Read-only
// opens of a mounted image are allowed.
var ErrMounted = blockdev.ErrMounted
