package btrfs

import (
	"sync"
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
	n = roundUpTo(n, uint64(fsys.sb.SectorSize))
	if g := c.gate; g != nil {
		// Changes beside this one may have checked space they have not
		// allocated yet: count it as taken.
		// Only the free bytes of the DATA groups count: a new chunk
		// could take device space a change beside this one is about to
		// give a tree block, and with mixed groups tree blocks take data
		// bytes. When those do not suffice, the change runs alone.
		// A chunk is added here when the groups are short, before the
		// reservation, as AllocData would add it.
		g.mu.Lock()
		defer g.mu.Unlock()
		avail, mixed := t.DataFreeInGroups()
		if !mixed && (n > avail || n > avail-g.reserved) && t.GrowData() == nil {
			avail, mixed = t.DataFreeInGroups()
		}
		if mixed || n > avail || n > avail-g.reserved {
			return errRunAlone
		}
		g.reserved += n
		c.reserved += n
		return nil
	}
	ok, err := t.DataFits(n)
	if err != nil {
		return err
	}
	if !ok {
		return syscall.ENOSPC
	}
	return nil
}

// spaceGate is what changes running in parallel (runParallel) have
// reserved of the data space: each checks its need against what is
// available less the others' reservations, and releases its own when it
// is over (its allocations then count in the space itself).
type spaceGate struct {
	mu       sync.Mutex
	reserved uint64
}

// release returns c's reservation.
func (g *spaceGate) release(c *wctx) {
	g.mu.Lock()
	g.reserved -= c.reserved
	c.reserved = 0
	g.mu.Unlock()
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
