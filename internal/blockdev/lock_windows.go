//go:build windows

package blockdev

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockOffset is the byte Windows locks stand on: far past the end of any
// image. Windows byte-range locks are mandatory, so a lock on the image's
// own bytes would make reads through other handles (the read side of a
// writable FS, readers in other processes) fail; nothing ever reads or
// writes this byte, yet two exclusive locks on it still conflict.
const lockOffset uint64 = 1<<63 - 2

// lockWriter takes an exclusive LockFileEx lock on one byte of f, without
// waiting. held reports that another handle of the file (in this process
// or another) has it: the lock belongs to the handle. Closing f releases
// it, also when the process dies.
func lockWriter(f *os.File) (held bool, err error) {
	ol := windows.Overlapped{Offset: uint32(lockOffset & 0xffffffff), OffsetHigh: uint32(lockOffset >> 32)}
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION):
		return true, nil
	case errors.Is(err, windows.ERROR_NOT_SUPPORTED), errors.Is(err, windows.ERROR_INVALID_FUNCTION):
		return false, nil
	}
	return false, err
}
