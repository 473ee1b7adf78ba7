//go:build unix && !freebsd

package extract

import "golang.org/x/sys/unix"

// mknodHost makes a device node, fifo or socket with the host's encoding
// of the device number.
func mknodHost(dst string, mode, major, minor uint32) error {
	return unix.Mknod(dst, mode, int(unix.Mkdev(major, minor)))
}
