package btrfs

import (
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// checkDataSpace refuses, before anything changes, a change that needs n
// bytes of new data extents when the filesystem cannot provide them
// (ENOSPC): without it the change would fail half way and abort the
// transaction. Compressed writes are not refused up front, since they
// may need far less; they can still fail late.
func (c *wctx) checkDataSpace(n uint64) error {
	fsys, t := c.fsys, c.t
	if n == 0 || fsys.w.opts.Compress != "" {
		return nil
	}
	avail, err := t.DataAvailable()
	if err != nil {
		return err
	}
	if roundUpTo(n, uint64(fsys.sb.SectorSize)) > avail {
		return syscall.ENOSPC
	}
	return nil
}

// holeBytes counts the bytes of [a, b) of inode ino that no data or
// preallocated extent covers: what fallocate must allocate.
func (c *wctx) holeBytes(ino disk.ObjectID, a, b uint64) (uint64, error) {
	exts, err := c.fileExtents(ino, a, b)
	if err != nil {
		return 0, err
	}
	covered := uint64(0)
	for _, e := range exts {
		if e.fe.IsHole() {
			continue
		}
		lo, hi := max(e.start, a), min(e.start+e.length, b)
		if lo < hi {
			covered += hi - lo
		}
	}
	return b - a - min(covered, b-a), nil
}
