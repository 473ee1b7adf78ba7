//go:build linux

package blockdev

import (
	"os"

	"golang.org/x/sys/unix"
)

// blockDeviceSize asks the kernel for the capacity of a block device.
func blockDeviceSize(f *os.File) (int64, bool) {
	n, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64)
	if err != nil || n > 1<<62 {
		return 0, false
	}
	return int64(n), true
}
