//go:build !linux

package blockdev

import "os"

// blockDeviceSize has no portable ioctl; the caller seeks to the end instead.
func blockDeviceSize(*os.File) (int64, bool) { return 0, false }
