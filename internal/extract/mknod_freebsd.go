package extract

import "golang.org/x/sys/unix"

// mknodHost makes a device node, fifo or socket with the host's encoding
// of the device number (FreeBSD's mknod takes a 64-bit dev_t).
func mknodHost(dst string, mode, major, minor uint32) error {
	return unix.Mknod(dst, mode, unix.Mkdev(major, minor))
}
