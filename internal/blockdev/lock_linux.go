//go:build linux

package blockdev

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// lockWriter takes an exclusive open-file-description lock on the whole of
// f, without waiting. held reports that another open of the file (in this
// process or another) has it. OFD locks, unlike classic POSIX locks,
// belong to the open file, not to the process: a second open in the same
// process conflicts too, and closing some other descriptor of the file
// does not drop the lock. Closing f releases it, also when the process
// dies.
//
// A filesystem that cannot lock at all (ENOLCK: NFS without a lock
// manager; EOPNOTSUPP, EINVAL) leaves the file unlocked rather than
// unwritable: the lock protects against a mistake, it is not needed to
// write correctly.
func lockWriter(f *os.File) (held bool, err error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart} // Start 0, Len 0: the whole file, however long
	err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
		return true, nil
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		return false, nil
	}
	return false, err
}
