package btrfs

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// File.Sync through the tree log (docs/design/0019): when every change of
// the running transaction is a plain data write to a file that existed
// at the last commit, an fsync logs the file instead of committing
// everything. The log holds the file's inode item and the file extent
// items this transaction wrote, with their data's checksums; a mount
// after a crash replays them over the last commit (the kernel does; so
// does our writable open). Any other change (a create, a rename, a
// truncate, an xattr, a hole punched, a reflink) makes every later fsync
// of the transaction a commit, as the kernel falls back to a full commit
// where its log cannot describe a change: the rule is coarser than the
// kernel's, and safe because the only thing a log ever says is "this
// file's inode and these extents", over a committed tree that still has
// every name and every other item of the file.

// logState is what the writer knows about the tree log in the running
// transaction; it lives in txCache, so each transaction starts afresh.
type logState struct {
	// off is set by the first change that the log cannot describe.
	off bool
	// dirty are the files written since they were last logged, each
	// with the file extent items set (or deleted: nil) since, the last
	// value of each key; logged are those whose latest writes a synced
	// log holds. Every change of a file's extent items goes through
	// wctx.apply, which records it, so the log kept in step this way
	// holds every key the transaction set, as it is now: replaying
	// them (each drops its range of the committed items, then goes in)
	// gives the running transaction's extent items.
	dirty  map[dirKey]map[disk.Key][]byte
	logged map[dirKey]*txn.LogFlight
}

// logOp is one file extent item apply set (data) or deleted (nil).
type logOp struct {
	file dirKey
	key  disk.Key
	data []byte
}

// noteLoggable records, after a successful change, what it means for the
// log: a plain data write marks its file dirty with the items it
// changed, anything else turns the log off for the transaction.
func (w *writer) noteLoggable(c *wctx) {
	l := &w.cache.log
	if c.logFile == nil || l.off {
		l.off = true
		l.dirty, l.logged = nil, nil
		return
	}
	if l.dirty == nil {
		l.dirty, l.logged = map[dirKey]map[disk.Key][]byte{}, map[dirKey]*txn.LogFlight{}
	}
	f := *c.logFile
	ops := l.dirty[f]
	if ops == nil {
		ops = map[disk.Key][]byte{}
		l.dirty[f] = ops
	}
	for _, op := range c.logOps {
		if op.file != f {
			// A plain write changes only its own file's items.
			l.off = true
			l.dirty, l.logged = nil, nil
			return
		}
		ops[op.key] = op.data
	}
	delete(l.logged, f)
}

// syncLogged makes file ino of subvolume sv durable through the tree log.
// done is false when the log cannot (the caller commits instead).
// Concurrent calls are combined with each other and with changes
// (writer.combine): one batch logs every file its fsyncs name and writes
// the log once, as the kernel's concurrent fsyncs share a log commit.
func (fsys *FS) syncLogged(sv, ino disk.ObjectID) (done bool, err error) {
	w := fsys.w
	if w == nil || fsys.view || w.opts.NoTreeLog {
		return false, nil
	}
	r := &changeReq{fsys: fsys, op: "sync", logFile: &dirKey{tree: sv, ino: ino}}
	w.combine(r)
	if r.logged && r.err == nil && r.finishAfter != nil {
		// The log sync goes to the devices without the lock.
		if err := r.finishAfter(); err != nil {
			w.mu.Lock()
			if w.dead == nil {
				w.dead = err
			}
			w.mu.Unlock()
			return true, err
		}
	}
	return r.logged, r.err
}

// logLocked is the first half of an fsync through the log, in a batch
// with w.mu held. It returns true when the file must go into the log
// (syncLogLocked, at the end of the batch, does that); otherwise q is
// done: the file needed nothing or is in a log sync on its way
// (q.logged, maybe q.finishAfter), or the log cannot take it (q.logged
// false: the caller commits), or it failed (q.err).
func (fsys *FS) logLocked(w *writer, q *changeReq) bool {
	if w.dead != nil {
		q.logged, q.err = true, ErrAborted
		return false
	}
	if w.t == nil || w.cache == nil || w.cache.log.off {
		return false
	}
	k := *q.logFile
	l := &w.cache.log
	if f := l.logged[k]; f != nil {
		// A log sync holds its last writes: wait for it.
		q.logged, q.finishAfter = true, f.Finish
		return false
	}
	_, dirty := l.dirty[k]
	if !dirty {
		// Not changed in this transaction: its changes are in the
		// commits on their way, if any.
		q.logged, q.err = true, fsys.finish(w.flight, w.flightSeq)
		return false
	}
	return true
}

// syncLogLocked logs, at the end of a batch with fsyncs that need the
// log (logLocked), every file written since it was last logged, not only
// theirs, and hands the log to the devices once; each fsync waits for
// that log sync after the lock is released (syncLogged). Logging every
// dirty file is what makes fsyncs group: sysbench (and many programs)
// fsync file after file, and each later fsync finds its file in the log
// sync on its way and only waits for it, as every Sync a commit covers
// does, instead of making a log sync of its own.
func (fsys *FS) syncLogLocked(w *writer, qs []*changeReq) {
	l := &w.cache.log
	fallback := func() {
		for _, q := range qs {
			q.logged = false // each caller commits
		}
	}
	// A later change of the batch may have turned the log off, or
	// committed (past the dirty limit).
	if w.dead != nil || w.t == nil || l.off {
		fallback()
		return
	}
	fail := func(err error) {
		for _, q := range qs {
			q.logged, q.err = true, err
		}
	}
	// The log builds on the last commit, which must be durable.
	if err := fsys.finish(w.flight, w.flightSeq); err != nil {
		fail(err)
		return
	}
	files := slices.SortedFunc(maps.Keys(l.dirty), func(a, b dirKey) int {
		if a.tree != b.tree {
			return cmp.Compare(a.tree, b.tree)
		}
		return cmp.Compare(a.ino, b.ino)
	})
	for _, k := range files {
		var (
			items []txn.LogItem
			csums [][2]uint64
			err   error
		)
		if w.opts.TreeLogRebuild {
			items, csums, err = fsys.logAllItems(w.t, k.tree, k.ino)
			if err == nil {
				err = w.t.LogInodeRebuilt(k.tree, k.ino, items, csums)
			}
		} else {
			items, csums, err = fsys.logItems(w.t, k.tree, k.ino, l.dirty[k])
			if err == nil {
				err = w.t.LogInode(k.tree, k.ino, items, csums)
			}
		}
		if errors.Is(err, txn.ErrNotLogged) {
			l.off = true
			fallback()
			return
		}
		if err != nil {
			w.dead = err
			fail(err)
			return
		}
		delete(l.dirty, k)
	}
	f, err := w.t.PrepareLog()
	if errors.Is(err, txn.ErrNotLogged) {
		l.off = true
		fallback()
		return
	}
	if err != nil {
		w.dead = err
		fail(err)
		return
	}
	for _, k := range files {
		l.logged[k] = f
	}
	for _, q := range qs {
		q.logged, q.finishAfter = true, f.Finish
	}
}

// logItems is what the log gets for ino: its INODE_ITEM as it is now,
// the file extent items ops set or deleted since it was last logged, and
// the data ranges of new extents whose checksums go with them (extents of
// earlier transactions have theirs in the committed csum tree already).
func (fsys *FS) logItems(t *txn.Txn, sv, ino disk.ObjectID, ops map[disk.Key][]byte) ([]txn.LogItem, [][2]uint64, error) {
	tr, err := t.Tree(sv)
	if err != nil {
		return nil, nil, err
	}
	ik := disk.Key{ObjectID: ino, Type: disk.InodeItemKey}
	data, ok, err := tr.Lookup(t.Trans(), ik)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, &fs.PathError{Op: "sync", Path: fmt.Sprintf("inode %d", ino), Err: fs.ErrNotExist}
	}
	var inode disk.InodeItem
	if err := inode.Decode(data); err != nil {
		return nil, nil, &disk.CorruptError{Tree: sv, Key: &ik, What: "inode item", Err: err}
	}
	items := make([]txn.LogItem, 0, 1+len(ops))
	items = append(items, txn.LogItem{Key: ik, Data: append([]byte(nil), data...)})
	var csums [][2]uint64
	gen := t.Generation()
	for k, d := range ops {
		items = append(items, txn.LogItem{Key: k, Data: d})
		if d == nil {
			continue
		}
		var fe disk.FileExtentItem
		if err := fe.Decode(d); err != nil {
			return nil, nil, &disk.CorruptError{Tree: sv, Key: &k, What: "file extent item", Err: err}
		}
		if r, ok := newDataRange(&fe, gen); ok {
			csums = append(csums, r)
		}
	}
	if inode.Flags&disk.InodeNoDataSum != 0 {
		csums = nil
	}
	slices.SortFunc(items[1:], func(a, b txn.LogItem) int { return a.Key.Compare(b.Key) })
	return items, csums, nil
}

// logAllItems is what a log rebuilt per fsync gets for ino
// (Options.TreeLogRebuild): every item of the inode as the running
// transaction has it, in key order, with the data ranges of the
// transaction's own extents for their checksums.
func (fsys *FS) logAllItems(t *txn.Txn, sv, ino disk.ObjectID) ([]txn.LogItem, [][2]uint64, error) {
	tr, err := t.Tree(sv)
	if err != nil {
		return nil, nil, err
	}
	var (
		items []txn.LogItem
		csums [][2]uint64
		derr  error
		flags disk.InodeFlags
	)
	gen := t.Generation()
	first := disk.Key{ObjectID: ino}
	last := disk.Key{ObjectID: ino, Type: ^disk.KeyType(0), Offset: ^uint64(0)}
	err = tr.Range(t.Trans(), first, last, func(k disk.Key, data []byte) (bool, error) {
		items = append(items, txn.LogItem{Key: k, Data: append([]byte(nil), data...)})
		switch k.Type {
		case disk.InodeItemKey:
			var it disk.InodeItem
			if derr = it.Decode(data); derr != nil {
				return false, nil
			}
			flags = it.Flags
		case disk.ExtentDataKey:
			var fe disk.FileExtentItem
			if derr = fe.Decode(data); derr != nil {
				return false, nil
			}
			if r, ok := newDataRange(&fe, gen); ok {
				csums = append(csums, r)
			}
		}
		return true, nil
	})
	if err == nil && derr != nil {
		err = &disk.CorruptError{Tree: sv, What: fmt.Sprintf("inode %d items", ino), Err: derr}
	}
	if err != nil {
		return nil, nil, err
	}
	if flags&disk.InodeNoDataSum != 0 {
		csums = nil
	}
	return items, csums, nil
}

// newDataRange is the disk range whose checksums the log carries for file
// extent fe: its referenced bytes, or the whole disk extent when it is
// compressed (checksums cover the stored bytes). ok is false for holes,
// inline and preallocated extents, and extents of earlier transactions
// (their checksums are committed already).
func newDataRange(fe *disk.FileExtentItem, gen disk.Generation) ([2]uint64, bool) {
	if fe.Generation != gen || fe.Type != disk.FileExtentReg || fe.DiskBytenr == 0 {
		return [2]uint64{}, false
	}
	a, n := uint64(fe.DiskBytenr)+fe.Offset, fe.NumBytes
	if fe.Compression != disk.CompressNone {
		a, n = uint64(fe.DiskBytenr), fe.DiskNumBytes
	}
	return [2]uint64{a, a + n}, true
}
