package txn

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// counters are the FS's measurements: the engine's counters per tree id,
// kept across transactions (a ctree.Tree lives for one Txn, its Stats for
// the FS), commits, and bytes written to the devices.
type counters struct {
	mu    sync.Mutex
	trees map[disk.ObjectID]*ctree.Stats // protected by mu; each Stats is atomic itself

	// noShortcut turns the seed patch's shortcut off in every tree opened
	// from now on (SetNoPushRightShortcut).
	noShortcut atomic.Bool

	commits  atomic.Int64         // successful commits
	logSyncs atomic.Int64         // log trees made durable (SyncLog)
	written  atomic.Int64         // bytes written to the devices (blockdev.Counted)
	shares   blockdev.ShareCounts // data shared with host files, or refused (blockdev.Counted)
}

func (c *counters) init() { c.trees = map[disk.ObjectID]*ctree.Stats{} }

// treeOptions are the engine options for tree id: its Stats, and the
// shortcut switch.
func (fs *FS) treeOptions(id disk.ObjectID) ctree.Options {
	c := &fs.counters
	c.mu.Lock()
	st := c.trees[id]
	if st == nil {
		st = new(ctree.Stats)
		c.trees[id] = st
	}
	c.mu.Unlock()
	return ctree.Options{NoPushRightShortcut: c.noShortcut.Load(), Stats: st}
}

// SetNoPushRightShortcut turns the seed patch's shortcut in
// push_leaf_right off (or back on) for every tree opened by transactions
// that begin afterwards. For measurement only: both ways make valid trees.
func (fs *FS) SetNoPushRightShortcut(off bool) { fs.counters.noShortcut.Store(off) }

// TreeStats returns the engine's counters of every tree opened since the
// FS was opened, by tree id, summed over all transactions. It may be
// called while transactions run; counters are read one by one.
func (fs *FS) TreeStats() map[disk.ObjectID]ctree.StatsSnapshot {
	c := &fs.counters
	c.mu.Lock()
	trees := maps.Clone(c.trees)
	c.mu.Unlock()
	out := make(map[disk.ObjectID]ctree.StatsSnapshot, len(trees))
	for id, st := range trees {
		out[id] = st.Snapshot()
	}
	return out
}

// Commits returns how many commits completed since the FS was opened.
func (fs *FS) Commits() int64 { return fs.counters.commits.Load() }

// LogSyncs returns how many fsyncs went to the tree log (SyncLog) since
// the FS was opened.
func (fs *FS) LogSyncs() int64 { return fs.counters.logSyncs.Load() }

// BytesWritten returns the bytes written to the devices since the FS was
// opened: tree blocks (every copy), data, superblocks.
func (fs *FS) BytesWritten() int64 { return fs.counters.written.Load() }

// BytesShared returns the data bytes stored since the FS was opened by
// sharing the blocks of host files (Txn.WriteDataShared) instead of
// writing them, and those offered for sharing that had to be written
// (the host refused), every copy counted. BytesWritten includes the
// refused ones, not the shared ones.
func (fs *FS) BytesShared() (shared, refused int64) {
	return fs.counters.shares.Shared.Load(), fs.counters.shares.Refused.Load()
}
