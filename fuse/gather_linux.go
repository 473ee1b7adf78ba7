//go:build linux

package fuse

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobtrfs/btrfs"
)

// Write gathering (docs/design/0011-fuse-mount.md, "Write gathering").
// Without the kernel's writeback cache every write(2) is one WRITE request,
// and the kernel sends the writes to one file one at a time (it holds the
// inode's lock across each). Under sysbench's seqwr, sixteen threads take
// turns on one file at 8 KiB a write, so what each WRITE costs the daemon
// is paid sixteen times over in waiting: a File.WriteAt (a change of the
// extent tree with its checksums) for every 8 KiB held the mount at 0.65
// to 0.78x the loopback. So a small write that continues the last one of
// its inode is copied into the inode's gather buffer and answered at once;
// the buffer goes into the filesystem as one File.WriteAt when the next
// write does not continue it or does not fit, and before every request
// that can see the inode's data or size: read, getattr, lseek, setattr,
// fallocate, copy_file_range, the flags ioctl, fsync, flush (close),
// release; lookups, directory listings and statfs put every buffer in
// first. A timer puts a buffer in after Options.GatherDelay, so data is never
// held back from the background commit for longer than that.
//
// Errors: a gathered write that fails when it goes in (ENOSPC, or the
// filesystem aborted) is reported by the next fsync or close of the file
// (as the kernel reports a writeback error), and by the write that made
// it go in. Gathering stops while free space is low (gatherMinFree), so
// near full every write(2) hears ENOSPC itself, as it does on the kernel's
// btrfs, which reserves space at write time.
const (
	// gatherMax is the largest write gathered; larger ones go in as
	// they are (FUSE writes are at most 1 MiB, MaxWrite).
	gatherMax = 128 << 10
	// gatherCap is the most one inode gathers: 128 writes of 8 KiB,
	// the extent growPrevious makes at most (btrfs's maxGrownExtent).
	gatherCap = 1 << 20
	// gatherTotal bounds what the mount holds back over all inodes.
	gatherTotal = 16 << 20
	// gatherMinFree is the free space below which nothing is gathered.
	gatherMinFree = 2 * gatherTotal
	// spaceEvery is how often the free space is looked at again.
	spaceEvery = time.Second
)

// gather is one inode's gathered writes.
type gather struct {
	mu  sync.Mutex
	buf []byte // bytes for [off, off+len(buf)) of the file
	off int64
	// f is the open file the buffer goes in through: one of the
	// inode's handles, whose Release puts the buffer in before it
	// closes f.
	f *btrfs.File
	// err is the first failure of a gathered write not yet reported
	// by fsync or close.
	err   error
	timer *time.Timer
}

// gathering is the mount's side: which inodes hold gathered bytes.
type gathering struct {
	mu      sync.Mutex
	pending map[*node]struct{} // protected by mu
	count   atomic.Int32       // len(pending), read without mu
	bytes   atomic.Int64       // bytes held over all inodes

	// The free space as last looked at, and when (UnixNano).
	free    atomic.Uint64
	spaceAt atomic.Int64
}

// gatherWrite takes data for off as a gathered write of h, or returns
// false when it must go in as it is (the buffer went in before; a
// failure of that is errno).
func (h *handle) gatherWrite(data []byte, off int64) (gathered bool, errno error) {
	n, m := h.n, h.n.m
	if m.opts.NoGather || len(data) > gatherMax || !m.gatherSpace() {
		return false, n.putGathered()
	}
	g := &n.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.buf) > 0 && (g.off+int64(len(g.buf)) != off || len(g.buf)+len(data) > gatherCap) {
		if err := n.putLocked(); err != nil {
			return false, err
		}
	}
	if len(g.buf) == 0 {
		g.off, g.f = off, h.f
		if g.buf == nil {
			g.buf = make([]byte, 0, min(gatherCap, max(4*len(data), 64<<10)))
		}
		m.gather.mu.Lock()
		if m.gather.pending == nil {
			m.gather.pending = map[*node]struct{}{}
		}
		m.gather.pending[n] = struct{}{}
		m.gather.count.Store(int32(len(m.gather.pending)))
		m.gather.mu.Unlock()
		if g.timer == nil {
			g.timer = time.AfterFunc(m.gatherDelay(), func() { _ = n.putGathered() })
		} else {
			g.timer.Reset(m.gatherDelay())
		}
	}
	g.buf = append(g.buf, data...)
	if m.gather.bytes.Add(int64(len(data))) > gatherTotal {
		// Over the mount's bound: this one goes in now; the write
		// itself succeeded either way (its error waits in g.err).
		_ = n.putLocked()
	}
	return true, nil
}

// putGathered puts n's gathered bytes into the filesystem and returns
// the error of doing so (also kept for fsync and close).
func (n *node) putGathered() error {
	n.g.mu.Lock()
	defer n.g.mu.Unlock()
	return n.putLocked()
}

// putLocked is putGathered with n.g.mu held.
func (n *node) putLocked() error {
	g := &n.g
	if len(g.buf) == 0 {
		return nil
	}
	_, err := g.f.WriteAt(g.buf, g.off)
	m := n.m
	m.gather.bytes.Add(-int64(len(g.buf)))
	m.gather.mu.Lock()
	delete(m.gather.pending, n)
	m.gather.count.Store(int32(len(m.gather.pending)))
	m.gather.mu.Unlock()
	g.buf, g.f = g.buf[:0], nil
	if err != nil && g.err == nil {
		g.err = err
	}
	return err
}

// gatheredErr puts n's gathered bytes in and returns, once, the first
// failure of a gathered write since the last call: what fsync and close
// report.
func (n *node) gatheredErr() error {
	n.g.mu.Lock()
	defer n.g.mu.Unlock()
	_ = n.putLocked()
	err := n.g.err
	n.g.err = nil
	return err
}

// dropGather puts n's gathered bytes in and lets its buffer go: its last
// handle closes.
func (n *node) dropGather() {
	n.g.mu.Lock()
	defer n.g.mu.Unlock()
	_ = n.putLocked()
	n.g.buf = nil
	if n.g.timer != nil {
		n.g.timer.Stop()
	}
}

// putAllGathered puts every inode's gathered bytes in: before requests
// that report other inodes' sizes (lookup, listings) or the free space.
func (m *mount) putAllGathered() {
	if m.gather.count.Load() == 0 {
		return
	}
	m.gather.mu.Lock()
	nodes := make([]*node, 0, len(m.gather.pending))
	for n := range m.gather.pending {
		nodes = append(nodes, n)
	}
	m.gather.mu.Unlock()
	for _, n := range nodes {
		_ = n.putGathered()
	}
}

// gatherDelay is Options.GatherDelay or its default.
func (m *mount) gatherDelay() time.Duration {
	if m.opts.GatherDelay > 0 {
		return m.opts.GatherDelay
	}
	return DefaultGatherDelay
}

// lookAtSpace sets the free space gatherSpace goes by: what data can
// still take, the unused bytes of the data block groups and half the
// space no block group has yet (a new data group may need two copies,
// and metadata takes its share). The filesystem's total less its used
// bytes is not that: a small image runs out of data space with a third
// of it still unused.
func (m *mount) lookAtSpace(now int64) {
	var free uint64
	if info, err := m.fsys.Info(); err == nil {
		for _, g := range info.BlockGroups {
			if strings.HasPrefix(g.Type, "DATA") && g.Length > g.Used {
				free += g.Length - g.Used
			}
		}
		for _, d := range info.Devices {
			if d.TotalBytes > d.BytesUsed {
				free += (d.TotalBytes - d.BytesUsed) / 2
			}
		}
	}
	m.gather.free.Store(free)
	m.gather.spaceAt.Store(now)
}

// gatherSpace reports whether the filesystem has room enough to gather,
// looking at its free space at most every spaceEvery.
func (m *mount) gatherSpace() bool {
	now := time.Now().UnixNano()
	if at := m.gather.spaceAt.Load(); now-at > int64(spaceEvery) && m.gather.spaceAt.CompareAndSwap(at, now) {
		// One request looks; the others go by the last figure.
		m.lookAtSpace(now)
	}
	return m.gather.free.Load() >= gatherMinFree
}
