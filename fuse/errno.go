package fuse

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/gobtrfs/btrfs"
)

// toErrno is the one mapping from the btrfs package's errors to what the
// kernel gets. The btrfs package already wraps the errno Linux would give
// (in *fs.PathError or *os.LinkError), so most errors unwrap to it; the
// rest are its sentinels. Anything unknown is EIO, never success.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	switch {
	case errors.As(err, &en):
		return en
	case errors.Is(err, btrfs.ErrAborted):
		// The kernel turns a filesystem read-only after a transaction
		// abort; programs see EROFS from then on.
		return syscall.EROFS
	case errors.Is(err, btrfs.ErrCorrupt), errors.Is(err, btrfs.ErrMissingDevice):
		return syscall.EIO
	case errors.Is(err, btrfs.ErrUnsupported):
		return syscall.EOPNOTSUPP
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return syscall.EPERM
	case errors.Is(err, fs.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, fs.ErrClosed):
		return syscall.EBADF
	}
	return syscall.EIO
}
