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

// cloneRange makes [off, off+n) of dst share the blocks of src at
// [srcOff, srcOff+n) (FICLONERANGE). The host refuses (EXDEV, EINVAL,
// EOPNOTSUPP) unless both files are on one filesystem that clones and
// the three numbers are multiples of its block size; the caller then
// writes the bytes.
func cloneRange(dst *os.File, off int64, src *os.File, srcOff, n int64) error {
	return unix.IoctlFileCloneRange(int(dst.Fd()), &unix.FileCloneRange{
		Src_fd: int64(src.Fd()), Src_offset: uint64(srcOff), Src_length: uint64(n), Dest_offset: uint64(off)})
}
