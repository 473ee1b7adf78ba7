//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package blockdev

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockWriter takes an exclusive flock(2) lock on f, without waiting. held
// reports that another open of the file (in this process or another) has
// it: flock locks belong to the open file, so a second open in the same
// process conflicts too. Closing f releases it, also when the process dies.
// These systems have no OFD locks, and classic POSIX locks would not stop
// a second writer in the same process.
//
// A filesystem that cannot lock (EOPNOTSUPP) leaves the file unlocked
// rather than unwritable.
func lockWriter(f *os.File) (held bool, err error) {
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	case errors.Is(err, unix.EOPNOTSUPP):
		return false, nil
	}
	return false, err
}
