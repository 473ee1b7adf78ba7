//go:build linux

package fuse

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobtrfs/btrfs"
)

// Write gathering (docs/design/0011-fuse-mount.md, "Caching").
// Without the kernel's writeback cache every write(2) is one WRITE request,
// and the kernel sends the writes to one file one at a time (it holds the
// inode's lock across each). Under sysbench's seqwr every thread writes
// the same file, so what each WRITE costs the daemon is paid by all of
// them in waiting: a File.WriteAt (one change of the filesystem) for every
// 8 KiB held the mount at 0.65 to 0.78x the loopback. So small writes are
// copied into the inode's gather buffer and answered at once; the buffer
// goes into the filesystem as one File.WriteAtMany (one change, the
// pieces that continue each other joined into one run each) when it is
// full, when a write overlaps a piece it holds, and before every request
// that can see the inode's data or size: read, getattr, lseek, setattr,
// fallocate, copy_file_range, the flags ioctl, fsync, flush (close),
// release of the handle the buffer goes in through; lookups, directory listings and statfs put every buffer in
// first. A timer puts a buffer in after Options.GatherDelay, so data is
// never held back from the background commit for longer than that.
// Pieces need not continue each other: with many threads the kernel hands
// the writes of one file over in a shuffled order (512 sysbench threads:
// one write in nine continues the one before), and one change for all of
// them is what saves the time.
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
	// gatherPieces bounds the pieces of one inode's buffer.
	gatherPieces = 256
	// gatherTotal bounds what the mount holds back over all inodes.
	gatherTotal = 16 << 20
	// gatherMinFree is the free space below which nothing is gathered.
	gatherMinFree = 2 * gatherTotal
	// spaceEvery is how often the free space is looked at again.
	spaceEvery = time.Second
)

// gather is one inode's gathered writes.
type gather struct {
	mu sync.Mutex
	// arena holds the gathered bytes in the order they came; pieces
	// say where each write's are and where they go. No two pieces
	// overlap (a write that would is put in after the rest).
	arena  []byte
	pieces []gathered
	// f is the open file the buffer goes in through: one of the
	// inode's handles, whose Release puts the buffer in before it
	// closes f.
	f *btrfs.File
	// err is the first failure of a gathered write not yet reported
	// by fsync or close.
	err   error
	timer *time.Timer
}

// gathered is one gathered write: n bytes from arena[at:] for file offset
// off.
type gathered struct {
	off   int64
	at, n int
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
// failure of that is err).
func (h *handle) gatherWrite(data []byte, off int64) (taken bool, err error) {
	n, m := h.n, h.n.m
	if m.opts.NoGather || len(data) > gatherMax || !m.gatherSpace() {
		return false, n.putGathered()
	}
	g := &n.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pieces) > 0 && (len(g.arena)+len(data) > gatherCap || len(g.pieces) >= gatherPieces || g.overlaps(off, len(data))) {
		if err := n.putLocked(); err != nil {
			return false, err
		}
	}
	if len(g.pieces) == 0 {
		g.f = h.f
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
	if k := len(g.pieces) - 1; k >= 0 && g.pieces[k].off+int64(g.pieces[k].n) == off && g.pieces[k].at+g.pieces[k].n == len(g.arena) {
		g.pieces[k].n += len(data) // continues the last write
	} else {
		g.pieces = append(g.pieces, gathered{off: off, at: len(g.arena), n: len(data)})
	}
	// The arena grows by append from the first write's size: a file
	// written once and closed (an untar) costs a buffer of its size,
	// as the copy File.WriteAt makes does; one written on keeps its
	// arena, up to gatherCap, until its last handle closes.
	g.arena = append(g.arena, data...)
	if m.gather.bytes.Add(int64(len(data))) > gatherTotal {
		// Over the mount's bound: this one goes in now; the write
		// itself succeeded either way (its error waits in g.err).
		_ = n.putLocked()
	}
	return true, nil
}

// overlaps reports whether [off, off+n) meets a gathered piece.
func (g *gather) overlaps(off int64, n int) bool {
	end := off + int64(n)
	for _, p := range g.pieces {
		if off < p.off+int64(p.n) && p.off < end {
			return true
		}
	}
	return false
}

// runs returns the gathered writes as pieces for File.WriteAtMany, in
// file order, those that continue each other joined. It sorts g.pieces:
// called only to put them in, after which they go.
func (g *gather) runs() []btrfs.WritePiece {
	ps := g.pieces
	slices.SortFunc(ps, func(a, b gathered) int { return cmp.Compare(a.off, b.off) })
	var out []btrfs.WritePiece
	for i := 0; i < len(ps); {
		j, size := i+1, ps[i].n
		inArena := true // the run's bytes lie in order in the arena
		for j < len(ps) && ps[j].off == ps[j-1].off+int64(ps[j-1].n) {
			inArena = inArena && ps[j].at == ps[j-1].at+ps[j-1].n
			size += ps[j].n
			j++
		}
		var b []byte
		if inArena {
			b = g.arena[ps[i].at : ps[i].at+size]
		} else {
			b = make([]byte, 0, size)
			for _, p := range ps[i:j] {
				b = append(b, g.arena[p.at:p.at+p.n]...)
			}
		}
		out = append(out, btrfs.WritePiece{Off: ps[i].off, Data: b})
		i = j
	}
	return out
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
	if len(g.pieces) == 0 {
		return nil
	}
	err := g.f.WriteAtMany(g.runs())
	m := n.m
	m.gather.bytes.Add(-int64(len(g.arena)))
	m.gather.mu.Lock()
	delete(m.gather.pending, n)
	m.gather.count.Store(int32(len(m.gather.pending)))
	m.gather.mu.Unlock()
	g.arena, g.pieces, g.f = g.arena[:0], g.pieces[:0], nil
	if err != nil && g.err == nil {
		g.err = err
	}
	return err
}

// putThrough puts n's gathered bytes in when they would go in through f,
// which is about to close.
func (n *node) putThrough(f *btrfs.File) {
	n.g.mu.Lock()
	defer n.g.mu.Unlock()
	if n.g.f == f {
		_ = n.putLocked()
	}
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
	n.g.arena, n.g.pieces = nil, nil
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
