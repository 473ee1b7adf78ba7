//go:build linux

package mkfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// cloneFile makes dst share src's data (FICLONE), where the host
// filesystem can; false otherwise (dst is then still empty).
func cloneFile(dst, src *os.File) bool {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil
}
