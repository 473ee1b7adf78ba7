//go:build !linux

package blockdev

import (
	"errors"
	"os"
)

// blockDeviceSize has no portable ioctl; the caller seeks to the end instead.
func blockDeviceSize(*os.File) (int64, bool) { return 0, false }

// cloneRange: sharing a file range is Linux's FICLONERANGE here; other
// hosts write the bytes.
func cloneRange(dst *os.File, off int64, src *os.File, srcOff, n int64) error {
	return errors.ErrUnsupported
}
