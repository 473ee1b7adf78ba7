//go:build !linux

package blockdev

import "io/fs"

// kernelMount finds kernel mounts on Linux only: elsewhere gobtrfs has no
// reliable way to tell which image a mounted disk comes from (macOS's
// hdiutil and the BSDs' md devices keep that to themselves), and those
// kernels do not mount btrfs anyway.
func kernelMount(fs.FileInfo) *BusyError { return nil }

// busyBlockDevice leaves the error of a failed open as it is off Linux.
func busyBlockDevice(_ string, err error) error { return err }
