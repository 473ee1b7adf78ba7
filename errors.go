package btrfs

import (
	"io/fs"
	"syscall"

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

// ErrUnsupported is matched (errors.Is) by every error for a filesystem
// or change gobtrfs cannot handle (yet) without risking the image, such as
// shrinking a multi-device filesystem or writing to one with a log tree;
// the message names the feature. Nothing is changed. It matches the
// standard library's errors.ErrUnsupported as well, and mkfs's errors for
// options it cannot create (mkfs.ErrUnsupported) match it. What Linux
// itself refuses (an xattr namespace, a flag on a symlink) is the errno
// Linux gives, such as syscall.EOPNOTSUPP, not this error.
var ErrUnsupported = txn.ErrUnsupported

// ErrNotSupported is ErrUnsupported under the name issue 13 and most Go
// storage libraries use; both match the same errors.
var ErrNotSupported = ErrUnsupported

// ErrNoSpace is matched (errors.Is) by every error of a change or commit
// that ran out of space: no room left in the block groups, no device room
// for a new chunk, a tree item too large for a leaf. It is syscall.ENOSPC,
// so errors.Is(err, ErrNoSpace) and errors.Is(err, syscall.ENOSPC) agree
// on every system. A change that fails this way leaves the FS as
// ErrAborted describes when it had already changed something.
var ErrNoSpace error = syscall.ENOSPC

// errReadOnly is the error of every change to an FS opened with Open (or
// a snapshot view): it matches syscall.EROFS, as Linux answers writes to
// a read-only mount, and fs.ErrPermission, as os does for files opened
// read-only.
var errReadOnly error = readOnlyError{}

type readOnlyError struct{}

func (readOnlyError) Error() string        { return "read-only file system" }
func (readOnlyError) Unwrap() error        { return syscall.EROFS }
func (readOnlyError) Is(target error) bool { return target == fs.ErrPermission }

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
