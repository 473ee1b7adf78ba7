package btrfs

import (
	"errors"
	"maps"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Reads of a writable FS never take the writer's lock: they read a
// published view (docs/design/0009, "Reads that never stop"). The writer
// publishes one, with its lock held exclusively and no tree operation
// running, wherever the read side moves: after each change run alone,
// each parallel run, each commit's critical section, each abort or
// rollback. A view is immutable; what it reads of the running
// transaction comes from the blocks' versions the engine keeps for it
// (ctree.Trans.Publish, ReadAt): a block is copied on its first change
// after a publication, and only while a view may still read it.

// readView is one published state of the read side.
type readView struct {
	epoch   uint64 // the publication it is; immutable
	version uint64 // writer.version when published; immutable
	// tx is the running transaction the view reads (nil for a view of
	// the last commit) and txEpoch its publication there; immutable.
	tx      *ctree.Trans
	txEpoch uint64
	// fs reads this view with the main FS's top subvolume; vol is what
	// every FS of the volume (Subvolume views too) reads it through.
	fs  *FS
	vol *volume
	// refs counts the reads using the view, or is retiredRefs (plus the
	// reads that tried to take it after it was retired and are about to
	// give it back).
	refs atomic.Int64
}

// retiredRefs marks a view no read may take any more: a read that finds
// it after taking a reference gives the reference back and takes the
// current view instead.
const retiredRefs = math.MinInt64 / 2

// viewBlocks serves a view's tree blocks: the running transaction's
// private blocks as they were at the view's publication (ctree.Trans.ReadAt:
// not checksummed yet, so only the header is checked against the
// parent's promise), the committed ones through the committed reader. A
// committed address the transaction freed stays pinned until its commit
// is durable and the views older than it are gone (writer.drainViews), so
// it still holds what the view expects.
type viewBlocks struct {
	base  *blockReader
	tx    *ctree.Trans
	epoch uint64 // the transaction's publication (ctree.Trans.Publish)
}

// ReadBlock implements ctree.Reader.
func (vb *viewBlocks) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	if n, ok := vb.tx.ReadAt(addr, vb.epoch); ok {
		if err := n.CheckExpect(vb.base.blockParams(), e); err != nil {
			return nil, err
		}
		return n, nil
	}
	return vb.base.ReadBlock(addr, e)
}

// publish makes the read side as it is now the view reads take. The
// caller holds w.mu exclusively (or is the only user, at open) and no
// tree operation runs: the running transaction is between whole changes.
// It costs O(subvolumes): nothing is copied. The blocks the next changes
// write are copied on their first write lock instead, for the views that
// may read them (ctree.Trans.Publish), and dropped as soon as no live
// view can (Trim, below).
func (fsys *FS) publish() {
	w := fsys.w
	w.epoch++
	var blocks ctree.Reader = fsys.br
	var tx *ctree.Trans
	var txEpoch uint64
	if tb, ok := fsys.blocks.(*txBlocks); ok {
		tx = tb.tx
		txEpoch = tx.Publish()
		blocks = &viewBlocks{base: fsys.br, tx: tx, epoch: txEpoch}
	}
	fsys.mu.Lock()
	subvols := maps.Clone(fsys.subvols)
	fsys.mu.Unlock()
	vol := &volume{sb: fsys.sb, br: fsys.br, blocks: blocks, data: fsys.data, chunks: fsys.chunks,
		devPaths: fsys.devPaths, opts: fsys.opts, rootTree: fsys.rootTree, csumRoot: fsys.csumRoot,
		subvols: subvols, ext: fsys.ext, warnings: fsys.warnings}
	v := &readView{epoch: w.epoch, version: w.version.Load(), vol: vol, tx: tx, txEpoch: txEpoch}
	v.fs = &FS{volume: vol, top: fsys.top, w: w, rv: v}
	w.pub.Store(v)
	w.views = append(w.views, v)
	w.stale.Store(false)
	// The view before is retired now if no read holds it, and what only
	// it could read is dropped.
	w.retireViews()
	if tx != nil {
		w.trim()
	}
}

// retireViews retires the published views no read holds, but the
// current one. w.mu held.
func (w *writer) retireViews() {
	cur := w.pub.Load()
	live := w.views[:0]
	for _, v := range w.views {
		if v != cur && v.refs.CompareAndSwap(0, retiredRefs) {
			continue
		}
		live = append(live, v)
	}
	clear(w.views[len(live):])
	w.views = live
}

// drainViews waits until no read holds a view but the current one. The
// writer calls it, lock held, before anything may reuse space that an
// older view can read: the first change of a transaction after a commit
// or rollback (the bytes the commits freed become allocatable then),
// and resizes. Reads never wait for it; it waits only for reads that
// began before the current view was published.
func (w *writer) drainViews() {
	for wait := time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		w.retireViews()
		if len(w.views) <= 1 {
			return
		}
		if w.drainHook != nil {
			w.drainHook()
		}
		time.Sleep(wait)
	}
}

// drainReads is drainViews, then forgets the decoded compressed extents:
// a read of an older view may have cached one after the commit that
// freed it (followCommit clears them at the commit), and its address
// may now be handed out again.
func (fsys *FS) drainReads() {
	fsys.w.drainViews()
	fsys.ext.clear()
}

// readWindow is how long after a read was last seen beside a run of
// changes (w.lastOverlap) the writer keeps publishing a view at the end of
// every run (runEnded): writer.readWindow, which tests may set longer.
const readWindow = 100 * time.Millisecond

// readsOverlap reports whether reads are going on beside runs of changes:
// one holds a view now, or one was seen beside a run in the last
// readWindow (it waited for one in freshView, or held a view when one
// started or ended). A view being held now counts as seen. w.mu held
// exclusively.
func (w *writer) readsOverlap() bool {
	if len(w.views) > 1 || w.pub.Load().refs.Load() > 0 {
		w.noteOverlap()
		return true
	}
	return time.Now().UnixNano()-w.lastOverlap.Load() < int64(w.readWindow)
}

// noteOverlap records that a read was seen beside a run of changes, to
// the millisecond.
func (w *writer) noteOverlap() {
	now := time.Now().UnixNano()
	if now-w.lastOverlap.Load() > int64(time.Millisecond) {
		w.lastOverlap.Store(now)
	}
}

// runStarting is called at the start of each run of changes, w.mu held
// exclusively, before any tree operation. Unless reads go on beside runs
// (readsOverlap), it lets the current view go when no read holds it, so
// the run copies nothing for it: reads that come between changes (a FUSE
// lookup or open between a create and the next write: one caller doing
// one thing at a time) publish their own view when they come (freshView),
// which waits for nothing since no run is in progress then, and the run
// after them pays no copy of the blocks it changes for a view that no
// read will take again.
func (w *writer) runStarting() {
	if w.stale.Load() && len(w.views) == 0 {
		return // let go already
	}
	if w.readsOverlap() {
		return
	}
	w.letGo()
}

// runEnded is called at the end of each run of changes, w.mu held
// exclusively, the read side showing the run's result. While reads go on
// beside runs (readsOverlap) it publishes that result, so reads keep
// finding a current view and never wait. Otherwise it only marks the view
// stale and lets it go: the blocks the next runs change are then copied
// for no one, and the first read that comes publishes (freshView).
func (w *writer) runEnded() {
	if w.readsOverlap() {
		w.main.publish()
		return
	}
	w.letGo()
}

// letGo marks the current view stale and retires every view no read
// holds, the current one too, so that nothing is kept for them. w.mu held
// exclusively.
func (w *writer) letGo() {
	w.stale.Store(true)
	w.retireViews()
	if cur := w.pub.Load(); cur.refs.CompareAndSwap(0, retiredRefs) {
		// No read holds it: retired like the others, so nothing is
		// kept for it.
		w.views = slices.DeleteFunc(w.views, func(v *readView) bool { return v == cur })
	}
	w.trim()
}

// trim tells the running transaction which of its publications live
// views still read. w.mu held exclusively, or shared with pubMu.
func (w *writer) trim() {
	tb, ok := w.main.blocks.(*txBlocks)
	if !ok {
		return
	}
	live := w.liveBuf[:0]
	for _, o := range w.views {
		if o.tx == tb.tx {
			live = append(live, o.txEpoch) // w.views is in publication order
		}
	}
	w.liveBuf = live
	tb.tx.Trim(live)
}

// acquire takes a reference on a view that shows every change that has
// returned: the current one, or, when runs ended without publishing
// (runEnded), a new one (freshView).
func (w *writer) acquire() *readView {
	for !w.stale.Load() {
		v := w.pub.Load()
		if v.refs.Add(1) > 0 {
			return v
		}
		v.refs.Add(-1) // retired meanwhile: a newer one is current, or it went stale
	}
	return w.freshView()
}

// freshView publishes the read side as it is and takes the new view. It
// holds w.mu shared, so it waits for a run of changes or a commit in
// progress: the one case where a read waits (the first read beside a run
// after runs let their views go, runStarting and runEnded); having
// waited, it makes the runs of the next readWindow publish. Reads
// publishing at once take turns on pubMu; the writer, which publishes
// with mu held exclusively, never meets them.
func (w *writer) freshView() *readView {
	if !w.mu.TryRLock() {
		w.noteOverlap()
		w.mu.RLock()
	}
	defer w.mu.RUnlock()
	w.pubMu.Lock()
	defer w.pubMu.Unlock()
	if w.stale.Load() {
		w.main.publish()
	}
	v := w.pub.Load()
	v.refs.Add(1) // retired only with w.mu held exclusively, or by publish under pubMu
	return v
}

// reader returns an FS that reads a view showing every change that has
// returned, and the function that releases it: every public read of a
// writable FS runs on one, from its start to its end. A read-only FS
// never changes and reads itself.
func (fsys *FS) reader() (*FS, func()) {
	w := fsys.w
	if w == nil || fsys.rv != nil {
		return fsys, func() {}
	}
	v := w.acquire()
	r := v.fs
	if fsys.view {
		// A Subvolume view: its own top, at the view's root (rootInode
		// and fresh look the subvolume up in the view).
		r = &FS{volume: v.vol, top: fsys.top, view: true, w: w, rv: v}
	}
	return r, func() { v.refs.Add(-1) }
}

// staleCorrupt reports whether err, met by a read of view r, may come
// from bytes rewritten in place after r was published rather than from
// damage: a data checksum that fails while a newer view is current (a
// write that continues the running transaction's last partial sector
// rewrites it, and its checksum, in place). The read is then tried once
// more with the current view.
func (fsys *FS) staleCorrupt(err error) bool {
	return err != nil && fsys.rv != nil && errors.Is(err, ErrCorrupt) && fsys.w.pub.Load() != fsys.rv
}

// viewDropped reports whether read r's view showed a transaction that
// has been dropped since (Rollback, or an abort). The dropped
// transaction's data written behind is never written: a read of it
// through the view may have met the device's stale bytes, which a file
// without checksums cannot tell. Called after the read, it is exact
// (txn.Txn.Dropped): false means what was read is what the view showed.
func (fsys *FS) viewDropped() bool {
	if fsys.rv == nil {
		return false
	}
	tr, ok := fsys.data.(*txnDataReader)
	return ok && tr.t.Dropped()
}

// readAgain is why a read of file data must be read again in a newer
// view (readAgainWhy), or readDone.
type readAgain int

const (
	readDone    readAgain = iota
	readStale             // staleCorrupt: tried once more
	readDropped           // viewDropped: read again until a view that was not
)

// readAgainWhy says whether, and why, a read of view r that returned err
// must be read again with a newer view.
func (fsys *FS) readAgainWhy(err error) readAgain {
	switch {
	case fsys.viewDropped():
		return readDropped
	case fsys.staleCorrupt(err):
		return readStale
	}
	return readDone
}

// retryRead reports whether a read through fsys, whose try (from 0)
// ended in a view for reason why, reads again; the caller has released
// that view. A read whose view was dropped waits until the rollback or
// abort that dropped it has published the state after it (it holds
// w.mu throughout), so the next try does not take the dropped view
// again. A read bound to one view (FS.reader's result) has no other
// view to read and is not read again for a drop.
func (fsys *FS) retryRead(why readAgain, try int) bool {
	switch why {
	case readStale:
		return try == 0
	case readDropped:
		if fsys.w == nil || fsys.rv != nil {
			return false
		}
		fsys.w.mu.RLock()
		fsys.w.mu.RUnlock() //nolint:staticcheck // empty on purpose: waits for the writer
		return true
	}
	return false
}
