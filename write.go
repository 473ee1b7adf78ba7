package btrfs

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// ErrAborted is returned by every change after one failed half way: the
// transaction was aborted, the image is as the last Commit left it, and
// the FS takes no more changes (as the kernel after a transaction abort).
var ErrAborted = errors.New("btrfs: transaction aborted, filesystem takes no more changes")

// writer is the write side of an FS opened with OpenWritable: the
// transaction layer and the running transaction. Changes go through the
// copy-on-write trees of the transaction (ctree.Tree), never through the
// read path's cursors, because the transaction's dirty blocks live in the
// engine and are not served to a ctree.Reader until they are written out.
type writer struct {
	// mu orders changes and commits: they hold it exclusively. Reads
	// take the view published last (read_view.go) instead, so they see
	// the last commit or the running transaction between two whole
	// changes and never wait; only the few that need the live read side
	// hold mu shared (FS.rlock).
	mu sync.RWMutex
	// version counts changes, commits and aborts; open Files compare it
	// with the version they loaded their inode at.
	version atomic.Uint64
	// seq counts successful changes; durable is seq as of the last
	// durable commit (Sync's group commit compares them). seq is written
	// under mu and read without it.
	seq     atomic.Uint64
	durable atomic.Uint64 // seq as of the last commit known durable
	// parallel counts the changes that ran beside changes to other
	// inodes (runParallel), for WriteCounters.
	parallel atomic.Int64
	// parallelDirRenames counts the renames of directories among them.
	parallelDirRenames atomic.Int64
	began              time.Time // when the running transaction began; protected by mu
	// flight is the last commit prepared (maybe durable already) and
	// flightSeq the seq it covers; protected by mu.
	flight    *txn.Flight
	flightSeq uint64
	limit     uint64 // Options.DirtyLimit resolved; immutable

	stop, stopped chan struct{} // the background committer (sync.go)
	bgErr         error         // its first failure; protected by mu

	path  string
	opts  Options
	tfs   *txn.FS
	t     *txn.Txn // the running transaction, nil between transactions
	dead  error    // set when a change failed after it began changing trees
	close closerFunc

	// committed is the read side as last committed, while it shows the
	// running transaction (write_view.go); nil otherwise.
	committed *committedView
	cache     *txCache // for the running transaction

	// base is the data policy of a file without inode flags and
	// maxInline the largest inline extent's data (-1: none); both are
	// fixed at open, so PrepareData reads them without the lock.
	base      dataPolicy
	maxInline int

	// qmu protects queue and combining: the changes waiting for the
	// combiner, and whether one is at work (change); lastCompany, when a
	// change last found one at work (UnixNano), and yields, how often a
	// lone combiner yielded for the changes on their way (combine).
	qmu         sync.Mutex
	queue       []*changeReq
	combining   bool
	lastCompany int64
	yields      int64

	// prepared, when set (by tests), is called in each commit's critical
	// section, after Prepare, with the commit's generation.
	prepared func(gen uint64)

	// The published views of the read side (read_view.go): pub is the
	// current one; views, epoch and liveBuf are protected by mu, or by
	// pubMu with mu held shared (a read that publishes, freshView). stale
	// says pub is older than the running transaction; lastOverlap is when
	// a read was last seen beside a run of changes (UnixNano, kept to the
	// millisecond), readWindow how long that keeps runs publishing
	// (readsOverlap). main is the FS OpenWritable returned, whose read
	// side views copy.
	pub         atomic.Pointer[readView]
	views       []*readView
	epoch       uint64
	liveBuf     []uint64
	pubMu       sync.Mutex
	stale       atomic.Bool
	lastOverlap atomic.Int64
	readWindow  time.Duration
	main        *FS
	// Test hooks: midRun, when set, is called in the middle of each run
	// of changes, lock held, after the changes ran and before the view
	// is published; drainHook each time drainViews waits.
	midRun    func()
	drainHook func()
	// readHook, when set (by tests), is called by each File read of
	// data after it took its view and loaded the file's state, before
	// it reads: a read in progress, held there.
	readHook atomic.Pointer[func()]
	// renamePlanned, when set, is called by Rename between its checks
	// and its changes, with the rename's names.
	renamePlanned func(oldname, newname string)
	// rmdirHook, when set (by tests), is called by Remove of a subvolume
	// between the check that it is empty and its deletion.
	rmdirHook func()
}

// OpenWritable opens the filesystem in the image file or block device at
// path for reading and writing. Changes (Mkdir, Setxattr, ...) go into the
// running transaction; Commit, Sync, the background committer (every
// Options.CommitInterval) and Close make them durable, as the kernel's
// transaction commits do; Rollback drops them.
//
// The FS is safe for any number of goroutines. Its io/fs reads (Open,
// Stat, ReadDir, Xattrs, ...) see every change made so far, committed or
// not, never half of one; reads never wait, neither for one another nor
// for changes or commits in progress (docs/design/0009, "Reads that never
// stop"). Views made by Subvolume follow commits
// too. Paths reach into nested subvolumes; read-only subvolumes refuse
// changes (EROFS). opts may be nil.
//
// Small data writes are written behind the call that makes them (see
// docs/design/0008). When such a write fails, the error comes back from
// the next data change, data read or Commit, and the transaction is
// aborted by the next change that sees it or by Commit: the image stays
// as the last commit left it.
//
// Every device is locked for writing until Close: a second OpenWritable
// of the image, in this process or another, fails at once with an error
// matching ErrLocked, while Open (read-only) keeps working. On Linux a
// filesystem the kernel has mounted is refused with ErrMounted
// (docs/design/0010-image-locks.md).
func OpenWritable(path string, opts *Options) (*FS, error) {
	return openWritableWith(path, opts, blockdev.ScanOptions{})
}

// Commit makes every change since the last Commit durable as one btrfs
// transaction. With nothing changed it does nothing. Afterwards reads see
// the committed state.
func (fsys *FS) Commit() error {
	w, err := fsys.writable("commit", ".")
	if err != nil {
		return err
	}
	w.mu.Lock()
	f, seq, err := fsys.commitLocked()
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return fsys.finish(f, seq)
}

// commitLocked prepares the commit of the running transaction, if any,
// with w.mu held exclusively: the bookkeeping and the writes of every
// block (docs/design/0009, stage 2). The returned flight is made durable
// by finish, which callers run after releasing w.mu, so changes go on
// while the devices sync; seq is the change count the flight covers.
// With no transaction running it returns the last flight, which covers
// every change so far.
func (fsys *FS) commitLocked() (*txn.Flight, uint64, error) {
	w := fsys.w
	if w.dead != nil {
		return nil, 0, ErrAborted
	}
	if w.t == nil || w.seq.Load() == w.flightSeq {
		// Nothing changed since the last commit (a transaction whose
		// changes all failed before changing anything stays open).
		return w.flight, w.flightSeq, nil
	}
	if w.stale.Load() {
		// No view shows the changes since the last publication (reads
		// were quiet). Publish one now, so that a read arriving during
		// the critical section below reads it instead of waiting for
		// the commit (freshView). It costs a copy of each block Prepare
		// then edits, once per commit, and only after a quiet spell.
		w.main.publish()
	}
	t := w.t
	w.t = nil
	seq := w.seq.Load()
	// The subvolumes the changes wrote are stamped changed now.
	t.SetRootTime(disk.TimespecOf(fsys.now()))
	f, err := t.Prepare()
	if err != nil {
		w.dead = err
		fsys.showCommitted()
		return nil, 0, fmt.Errorf("%s: %w", w.path, err)
	}
	w.flight, w.flightSeq = f, seq
	if w.prepared != nil {
		w.prepared(uint64(f.Generation()))
	}
	return f, seq, fsys.followCommit()
}

// commitDurableLocked is commitLocked and finish with w.mu held, for the
// few callers that must see the commit durable before they go on (Close,
// Shrink). finish never takes w.mu, so this cannot deadlock.
func (fsys *FS) commitDurableLocked() error {
	f, seq, err := fsys.commitLocked()
	if err != nil {
		return err
	}
	return fsys.finish(f, seq)
}

// finish waits until flight f (of commitLocked) is durable and records
// that the changes up to seq are. It must not take w.mu: it runs both
// with and without it.
func (fsys *FS) finish(f *txn.Flight, seq uint64) error {
	if f == nil {
		return nil
	}
	w := fsys.w
	if err := f.Finish(); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	for {
		d := w.durable.Load()
		if d >= seq || w.durable.CompareAndSwap(d, seq) {
			return nil
		}
	}
}

// followCommit moves the read side to the commit just made, without
// reopening anything: the devices and their caches are the transaction
// side's own (so they saw every write), the chunk map is shared, and what
// could be stale is dropped: cached tree blocks are re-read when their
// parent expects a newer generation (blockReader.ReadBlock), decoded
// extents are forgotten (their addresses may be reused now that the
// commit unpinned them), and subvolume roots and the csum root are read
// again from the new root tree.
func (fsys *FS) followCommit() error {
	w := fsys.w
	defer w.main.publish()
	sb := w.tfs.Super()
	fsys.sb = &sb
	fsys.br.setGeneration(sb.Generation)
	fsys.blocks = fsys.br
	if cur, ok := fsys.data.(*txnDataReader); ok {
		fsys.data = cur.base
	}
	w.committed = nil
	fsys.ext.clear()
	fsys.rootTree = ctree.Root{Addr: sb.Root, Level: int(sb.RootLevel), Generation: sb.Generation, Owner: disk.RootTreeObjectID}
	fsys.mu.Lock()
	clear(fsys.subvols)
	fsys.mu.Unlock()
	w.version.Add(1)
	if err := fsys.loadCsumRoot(); err != nil {
		// The commit is durable, but the read side cannot follow it:
		// take no more changes rather than read a stale picture.
		w.dead = err
		return fmt.Errorf("%s: after commit: %w", w.path, err)
	}
	if _, err := fsys.subvolume(fsys.top.id); err != nil {
		w.dead = err
		return fmt.Errorf("%s: after commit: %w", w.path, err)
	}
	return nil
}

// writable returns the write side, or an error for a read-only FS.
func (fsys *FS) writable(op, name string) (*writer, error) {
	if fsys.w == nil || fsys.view {
		return nil, &fs.PathError{Op: op, Path: name, Err: errReadOnly}
	}
	return fsys.w, nil
}

// change runs fn with the write lock held and the transaction's top-level
// tree. fn validates first and returns started=false with its error if it
// changed nothing; an error after a change aborts the transaction.
//
// Changes are combined: a change queues itself, and the goroutine that
// finds no combiner at work becomes it, takes the lock once and runs the
// queued changes one after another, each whole and with its own result,
// while the others sleep until theirs is done. Under many writers this
// replaces a lock handoff per change (a wakeup of the next waiter, which
// then needs a CPU while the lock sits idle) with one per batch.
func (fsys *FS) change(op, name string, fn func(c *wctx) (started bool, err error)) error {
	return fsys.changeKeyed(op, name, nil, fn)
}

// changeInDir is change of a change that adds a new name to the
// directory holding name's last component and edits nothing else that
// exists (mkdir, create, symlink, mknod): it may run beside changes to
// other directories and files (runParallel), once that directory is
// resolved before the run; changes in one directory keep their order.
// Such a change never removes or moves a name, so the paths the others
// resolved stay true while it runs.
func (fsys *FS) changeInDir(op, name string, fn func(c *wctx) (started bool, err error)) error {
	return fsys.changeWith(op, name, &changeReq{fn: fn, resolve: func(c *wctx) ([]dirKey, error) {
		parent, _, err := c.splitParent(name)
		if err != nil {
			return nil, err
		}
		return []dirKey{{tree: parent.tr.Owner(), ino: parent.ino}}, nil
	}})
}

// changeUnlink is change of a change that removes a name from its
// directory: it edits that directory and the inode named, both resolved
// before a parallel run, and runs in order with every other change to
// either. An empty directory's removal may run in parallel too: a path
// that passes through it leads to a name made in it, by a change of the
// same chain (its directory is the one removed), which runs first and
// makes the removal fail with ENOTEMPTY; a change naming the directory
// itself is of the same chain. A subvolume's removal runs alone.
func (fsys *FS) changeUnlink(op, name string, fn func(c *wctx) (started bool, err error)) error {
	return fsys.changeWith(op, name, &changeReq{fn: fn, resolve: func(c *wctx) ([]dirKey, error) {
		parent, base, err := c.splitParent(name)
		if err != nil {
			return nil, err
		}
		de, err := c.dirEntry(parent.ino, base)
		switch {
		case err != nil:
			return nil, err
		case de == nil || de.Location.Type != disk.InodeItemKey:
			return nil, errRunAlone // nothing to remove, a subvolume
		}
		t := parent.tr.Owner()
		return []dirKey{{tree: t, ino: parent.ino}, {tree: t, ino: de.Location.ObjectID}}, nil
	}})
}

// changeLink is change of a change that gives the existing inode oldname
// resolves to a new name in newname's directory (link): it edits that
// inode and that directory, both resolved before a parallel run, and
// removes no name, so the paths others resolved stay true.
func (fsys *FS) changeLink(op, oldname, newname string, fn func(c *wctx) (started bool, err error)) error {
	return fsys.changeWith(op, oldname, &changeReq{fn: fn, resolve: func(c *wctx) ([]dirKey, error) {
		in, err := c.resolve(oldname)
		if err != nil {
			return nil, err
		}
		parent, _, err := c.splitParent(newname)
		if err != nil {
			return nil, err
		}
		return []dirKey{{tree: in.tr.Owner(), ino: in.ino}, {tree: parent.tr.Owner(), ino: parent.ino}}, nil
	}})
}

// changeRename is change of a rename (plain, RENAME_NOREPLACE or
// RENAME_EXCHANGE) within one subvolume: it edits the two directories,
// the inode moved and the one replaced or exchanged, all resolved before
// a parallel run. A change that resolved either name before the run is
// in the chain of the inode it found (or, for a name made later, of its
// directory, or it runs after the run).
//
// A directory's rename may run in parallel too. Paths others resolved
// through it before the run may no longer lead where they did, or lead
// nowhere while it is half done: each change of a run walks its paths
// again and runs after the run when one no longer leads where it did
// (walkDirs), so it either saw the rename wholly undone, and runs as if
// before it, or runs after the run. A directory moved to another parent
// must not end up under itself: that is checked before the run (a move
// under itself runs alone, and fails), and only one such move runs in a
// run (runParallel), so no other change of the run makes the check
// untrue, as the kernel's filesystem-wide rename lock keeps its check
// true. Renames of subvolumes, and across subvolumes, run alone.
func (fsys *FS) changeRename(op, oldname, newname string, fn func(c *wctx) (started bool, err error)) error {
	return fsys.changeWith(op, oldname, &changeReq{fn: fn, resolve: func(c *wctx) ([]dirKey, error) {
		if !validPath(newname) {
			return nil, errRunAlone
		}
		keys := make([]dirKey, 0, 4)
		var parents [2]*winode
		var ents [2]*disk.DirItem
		for i, name := range []string{oldname, newname} {
			parent, base, err := c.splitParent(name)
			if err != nil {
				return nil, err
			}
			de, err := c.dirEntry(parent.ino, base)
			switch {
			case err != nil:
				return nil, err
			case de == nil && i == 0:
				return nil, errRunAlone // nothing to move
			case de != nil && de.Location.Type != disk.InodeItemKey:
				return nil, errRunAlone // a subvolume
			}
			parents[i], ents[i] = parent, de
			t := parent.tr.Owner()
			keys = append(keys, dirKey{tree: t, ino: parent.ino})
			if de != nil {
				keys = append(keys, dirKey{tree: t, ino: de.Location.ObjectID})
			}
		}
		if parents[0].tr.Owner() != parents[1].tr.Owner() {
			return nil, errRunAlone // EXDEV, or a subvolume's move
		}
		across := parents[0].ino != parents[1].ino
		for i, de := range ents {
			if de == nil || de.Type != disk.FtDir {
				continue
			}
			c.dirMove = max(c.dirMove, dirMoveSame)
			if !across {
				continue
			}
			// A directory that would go under itself (or, replaced,
			// holds the other name's directory) runs alone, where the
			// rename fails as it should.
			c.dirMove = dirMoveAcross
			c.tr = parents[i].tr
			if under, err := c.dirUnder(parents[1-i].ino, de.Location.ObjectID); err != nil || under {
				return nil, errRunAlone
			}
		}
		return keys, nil
	}})
}

// changeOnInode is change of a change that edits the one existing inode
// name resolves to (c.resolve) and nothing else: attributes, xattrs,
// flags, data by path. It may run beside changes to other inodes
// (runParallel), once name is resolved before the run; in the run it
// walks name's directories again, and runs after the run when a change
// beside it (a directory's rename, a removal) made them lead elsewhere
// (walkDirs).
func (fsys *FS) changeOnInode(op, name string, fn func(c *wctx) (started bool, err error)) error {
	return fsys.changeWith(op, name, &changeReq{fn: fn, resolve: inodeOf(name)})
}

// inodeOf resolves name, as the changes of changeOnInode do, to the
// inode they edit.
func inodeOf(name string) func(c *wctx) ([]dirKey, error) {
	return func(c *wctx) ([]dirKey, error) {
		in, err := c.resolve(name)
		if err != nil {
			return nil, err
		}
		return []dirKey{{tree: in.tr.Owner(), ino: in.ino}}, nil
	}
}

// changeKeyed is change of a change that edits inode key and nothing
// else, when key is set: such a change never resolves a path, so it may
// run beside other keyed changes to other inodes (runParallel), as the
// kernel's writes to different files run under their own inode locks.
// Changes to one inode keep their order.
func (fsys *FS) changeKeyed(op, name string, key *dirKey, fn func(c *wctx) (started bool, err error)) error {
	return fsys.changeWith(op, name, &changeReq{fn: fn, key: key})
}

// changeWith queues r, a change of name, and returns its error.
func (fsys *FS) changeWith(op, name string, r *changeReq) error {
	w, err := fsys.writable(op, name)
	if err != nil {
		return err
	}
	if !validPath(name) {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	r.fsys, r.op, r.name = fsys, op, name
	w.combine(r)
	if r.finishAfter != nil && r.err == nil {
		if err := r.finishAfter(); err != nil {
			return &fs.PathError{Op: op, Path: name, Err: err}
		}
	}
	return r.err
}

// changeReq is one change waiting to be run by the combiner.
type changeReq struct {
	fsys     *FS
	op, name string
	fn       func(c *wctx) (started bool, err error)
	// key, when set, is the only inode the change edits (changeKeyed).
	key *dirKey
	// resolve, when set, finds the inodes the change edits
	// (changeInDir, changeOnInode, changeUnlink), before a parallel run.
	resolve func(c *wctx) ([]dirKey, error)
	// pins and dirMove are what resolve found (wctx.pins, wctx.dirMove).
	pins    map[string]wdir
	dirMove dirMove
	err     error
	// finishAfter, when set, is run by the change's own goroutine after
	// the lock is released (a commit the change started).
	finishAfter func() error
	// wake receives false when the change has run, true when its
	// goroutine is to take over as the combiner.
	wake chan bool
	// logFile, when set, makes this an fsync of that file through the
	// tree log (sync_log.go) instead of a change: the batch logs every
	// such file, then writes the log once for all of them. logged
	// reports whether it went through the log (else the caller commits).
	logFile *dirKey
	logged  bool
}

// parallel reports whether the change may run in parallel with others
// (runParallel).
func (q *changeReq) parallel() bool { return q.key != nil || q.resolve != nil }

// companyWindow is how long after a change last found a combiner at work
// a lone combiner still yields for the changes on their way (combine).
const companyWindow = 100 * time.Millisecond

// maxCombined bounds the changes one combiner runs under one hold of the
// lock, so that commits and reads waiting for it get their turn.
const maxCombined = 64

// combine runs r, and maybe others' changes with it (see change).
func (w *writer) combine(r *changeReq) {
	w.qmu.Lock()
	w.queue = append(w.queue, r)
	if w.combining {
		r.wake = make(chan bool, 1)
		w.lastCompany = time.Now().UnixNano()
		w.qmu.Unlock()
		if !<-r.wake {
			return // run by the combiner
		}
		// Handed the combiner's role, with r still queued.
	} else {
		w.combining = true
		// Reads no longer hold the lock (read_view.go), so nothing
		// else makes changes queue up behind a combiner: while changes
		// come from several goroutines (one found a combiner at work
		// lately), a lone one lets those already on their way join its
		// batch. A caller making one change at a time (the FUSE mount
		// under tar) has none on their way: yielding would only put it
		// behind every other goroutine, and on a busy machine behind
		// other processes, once per change.
		yield := len(w.queue) == 1 && time.Now().UnixNano()-w.lastCompany < int64(companyWindow)
		if yield {
			w.yields++
		}
		w.qmu.Unlock()
		if yield {
			runtime.Gosched()
		}
	}
	for {
		w.qmu.Lock()
		n := min(len(w.queue), maxCombined)
		batch := w.queue[:n:n]
		w.queue = w.queue[n:]
		w.qmu.Unlock()
		mine := false
		w.runBatch(batch)
		for _, q := range batch {
			if q == r {
				mine = true
			} else {
				q.wake <- false
			}
		}
		w.qmu.Lock()
		if len(w.queue) == 0 {
			w.combining = false
			w.qmu.Unlock()
			return
		}
		if mine {
			// Done with ours: the oldest waiter carries on.
			next := w.queue[0]
			w.qmu.Unlock()
			next.wake <- true
			return
		}
		w.qmu.Unlock()
	}
}

// runBatch runs changes under one hold of the lock. A run of keyed
// changes (changeKeyed) of one FS runs in parallel (runParallel); every
// other change runs alone, in arrival order.
func (w *writer) runBatch(batch []*changeReq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runStarting()
	// The fsyncs of the batch are looked at after its changes: each was
	// queued after the changes it must make durable had returned (in an
	// earlier batch or earlier in this one), and logging a file's later
	// changes too is harmless. So they do not cut runs of parallel changes.
	var syncs, changes, logSyncs []*changeReq
	for _, q := range batch {
		if q.logFile != nil {
			syncs = append(syncs, q)
		} else {
			changes = append(changes, q)
		}
	}
	for i := 0; i < len(changes); {
		q := changes[i]
		j := i + 1
		for q.parallel() && j < len(changes) && changes[j].parallel() && changes[j].fsys == q.fsys {
			j++
		}
		if j-i > 1 {
			q.fsys.runParallel(w, changes[i:j])
		} else {
			q.finishAfter, q.err = q.fsys.changeLocked(w, q.op, q.name, q.fn)
		}
		i = j
	}
	for _, q := range syncs {
		if q.fsys.logLocked(w, q) {
			logSyncs = append(logSyncs, q)
		}
	}
	if len(logSyncs) > 0 {
		logSyncs[0].fsys.syncLogLocked(w, logSyncs)
	}
}

// changeLocked runs one change with w.mu held (see change) and returns its
// error and, when it started a commit, what waits for that commit.
func (fsys *FS) changeLocked(w *writer, op, name string, fn func(c *wctx) (started bool, err error)) (finishAfter func() error, rerr error) {
	var (
		started bool
		err     error
		c       *wctx
	)
	for retried := false; ; retried = true {
		if c, err = fsys.beginChange(w); err != nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: err}
		}
		// Reads the change makes through the read side see its blocks
		// as they are now: txBlocks checks each copy's version.
		started, err = fn(c)
		if started {
			break
		}
		if retried || !errors.Is(err, syscall.ENOSPC) || !spacePinned(w) {
			break
		}
		// Out of space while bytes freed since the last durable commit
		// are pinned: commit, which makes them free, and try once more,
		// as the kernel commits to flush space before it says ENOSPC.
		if err := fsys.commitDurableLocked(); err != nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: err}
		}
	}
	if started && err == nil {
		w.noteLoggable(c)
		err = fsys.showTxn(w.t)
		w.version.Add(1)
		w.seq.Add(1)
		if w.midRun != nil {
			w.midRun()
		}
		w.runEnded()
	}
	if err == nil {
		f, err := fsys.commitPastLimit(w)
		if err != nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: err}
		}
		return f, nil
	}
	if started {
		fsys.abortLocked(w, err)
	}
	return nil, &fs.PathError{Op: op, Path: name, Err: err}
}

// spacePinned reports whether bytes may be pinned that a durable commit
// would free, and the writer may commit on its own: the running
// transaction changed something, or the last commit is not known durable
// yet.
func spacePinned(w *writer) bool {
	if w.limit == 0 {
		// DirtyLimit < 0: the caller makes every commit (Rollback then
		// drops exactly what came after its last one).
		return false
	}
	return (w.t != nil && w.seq.Load() != w.flightSeq) || (w.flight != nil && w.durable.Load() < w.flightSeq)
}

// commitPastLimit commits, with w.mu held, when the running transaction
// holds more than the dirty limit, instead of letting it grow while later
// changes wait for the lock. The change that crossed the limit then waits
// for the commit to be durable through the returned function, in its own
// goroutine after the lock is released (change): until then the space
// the commit freed cannot be reused.
func (fsys *FS) commitPastLimit(w *writer) (finishAfter func() error, err error) {
	if w.limit == 0 || w.t == nil || w.t.DirtyBytes() < w.limit {
		return nil, nil
	}
	f, seq, err := fsys.commitLocked()
	if err != nil {
		return nil, err
	}
	return func() error { return fsys.finish(f, seq) }, nil
}

// abortLocked ends the running transaction after a change failed
// half-way: its changes are dropped, the writer takes no more (ErrAborted)
// and the read side shows the last commit.
func (fsys *FS) abortLocked(w *writer, err error) {
	w.t.Abort()
	w.t = nil
	w.dead = err
	fsys.showCommitted()
}

// runParallel runs keyed changes (changeKeyed) with w.mu held, those of
// different inodes at once on up to GOMAXPROCS goroutines, those of one
// inode one after another in arrival order: the kernel's inode lock. What
// they share is safe for it: the trees (the engine's lock coupling), the
// transaction's allocators, data references, csum tree (txn.Txn), data
// space (spaceGate) and the writer's caches (txCache.mu). Reads wait
// for the whole run, so they never see half a change. A change that fails
// half-way aborts the transaction once the run is over, as in
// changeLocked; the changes beside it are dropped with it.
func (fsys *FS) runParallel(w *writer, reqs []*changeReq) {
	base, err := fsys.beginChange(w)
	if err != nil {
		for _, q := range reqs {
			q.err = &fs.PathError{Op: q.op, Path: q.name, Err: err}
		}
		return
	}
	// Changes that asked to run alone (errRunAlone), and the later
	// changes of their inodes, run after the others, one by one; so do
	// changes in a directory that cannot be resolved before the run
	// (another change of the run may be making it).
	alone := make([]bool, len(reqs))
	index := make(map[*changeReq]int, len(reqs))
	// Changes that share an inode go in one chain, in arrival order
	// (the requests joined through their inodes: union-find).
	up := make([]int, len(reqs))
	var root func(i int) int
	root = func(i int) int {
		for up[i] != i {
			up[i] = up[up[i]]
			i = up[i]
		}
		return i
	}
	owner := map[dirKey]int{}
	moved := false
	for qi, q := range reqs {
		index[q], up[qi] = qi, qi
		keys := []dirKey(nil)
		if q.key != nil {
			keys = []dirKey{*q.key}
		} else {
			c := *base
			c.pins, c.recordPins = map[string]wdir{}, true
			k, err := q.resolve(&c)
			q.pins, q.dirMove = c.pins, c.dirMove
			if err == nil && q.dirMove == dirMoveAcross {
				// One directory moves to another parent per run, so
				// the check that it does not go under itself, made
				// before the run, stays true in it.
				if moved {
					err = errRunAlone
				}
				moved = true
			}
			if err != nil {
				alone[qi] = true
				continue
			}
			keys = k
		}
		for _, k := range keys {
			if o, ok := owner[k]; ok {
				up[root(qi)] = root(o)
			} else {
				owner[k] = qi
			}
		}
	}
	var chains [][]*changeReq
	at := map[int]int{}
	for qi, q := range reqs {
		if alone[qi] {
			continue
		}
		r := root(qi)
		i, ok := at[r]
		if !ok {
			i = len(chains)
			at[r] = i
			chains = append(chains, nil)
		}
		chains[i] = append(chains[i], q)
	}
	gate := &spaceGate{}
	var (
		next    atomic.Int64
		started atomic.Int64
		failMu  sync.Mutex
		fail    error // the first error of a change that had started
		wg      sync.WaitGroup
	)
	run := func(q *changeReq) {
		failMu.Lock()
		dead := fail != nil
		failMu.Unlock()
		if dead {
			q.err = &fs.PathError{Op: q.op, Path: q.name, Err: ErrAborted}
			return
		}
		c := *base
		c.gate = gate
		// A change resolves in the run only what it resolved before it
		// (walkDirs); one without a path (changeKeyed) resolves none.
		c.pins = q.pins
		if c.pins == nil {
			c.pins = noPins
		}
		st, err := q.fn(&c)
		gate.release(&c)
		switch {
		case st && err == nil:
			w.cache.mu.Lock()
			w.noteLoggable(&c)
			w.cache.mu.Unlock()
			started.Add(1)
			w.version.Add(1)
			w.seq.Add(1)
			if len(chains) > 1 {
				w.parallel.Add(1)
				if q.dirMove != noDirMove {
					w.parallelDirRenames.Add(1)
				}
			}
		case st:
			failMu.Lock()
			if fail == nil {
				fail = err
			}
			failMu.Unlock()
		}
		if err != nil {
			q.err = &fs.PathError{Op: q.op, Path: q.name, Err: err}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(chains))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(chains) {
					return
				}
				later := false
				for _, q := range chains[i] {
					if !later {
						run(q)
						later = errors.Is(q.err, errRunAlone)
					}
					if later {
						alone[index[q]] = true // each index is one goroutine's
					}
				}
			}
		}()
	}
	wg.Wait()
	defer func() {
		for i, q := range reqs {
			if alone[i] {
				q.finishAfter, q.err = fsys.changeLocked(w, q.op, q.name, q.fn)
			}
		}
	}()
	if fail == nil && started.Load() > 0 {
		if fail = fsys.showTxn(w.t); fail == nil {
			if w.midRun != nil {
				w.midRun()
			}
			w.runEnded()
		}
	}
	if fail != nil {
		fsys.abortLocked(w, fail)
		return
	}
	if started.Load() == 0 {
		return
	}
	f, err := fsys.commitPastLimit(w)
	// The last change of the run that ran in it pays for the commit.
	for i := len(reqs) - 1; i >= 0; i-- {
		if q := reqs[i]; !alone[i] {
			if err != nil {
				q.err = &fs.PathError{Op: q.op, Path: q.name, Err: err}
			}
			q.finishAfter = f
			break
		}
	}
}

// noPins are the pins of a change that resolved no path before its run
// (changeKeyed): any path it walks in the run is one it did not resolve.
// Never written.
var noPins = map[string]wdir{}

// errRunAlone is what a change run in parallel (runParallel) returns,
// before it changes anything, when it cannot be sure of its data space
// beside the others, or when a path of it no longer leads where it led
// before the run (walkDirs): it then runs again alone, after them.
var errRunAlone = errors.New("btrfs: change must run alone")

// beginChange returns the context a change runs in, beginning a
// transaction when none runs; w.mu is held.
func (fsys *FS) beginChange(w *writer) (*wctx, error) {
	var err error
	if w.dead != nil {
		return nil, ErrAborted
	}
	if w.t == nil {
		// Views older than the current one may read bytes the commits
		// before freed, which the new transaction may hand out.
		fsys.drainReads()
		if w.t, err = w.tfs.Begin(); err != nil {
			return nil, err
		}
		prev := w.cache
		w.cache = newTxCache()
		if prev != nil {
			// Inode numbers are never reused while the FS is open, as
			// the kernel's in-memory free_objectid: counting again
			// from the highest number in the tree would hand a
			// removed file's number to a new file after a commit, and
			// an open File of the removed one (which reloads its
			// inode by number) would read the new file.
			w.cache.ino = prev.ino
			// DIR_INDEX counters carry over too, as the kernel keeps
			// them in the in-memory inode: counting again from the
			// highest index in the tree would hand a removed entry's
			// index to a new one after a commit, and a directory read
			// across that commit (an offset into DIR_INDEX order)
			// could skip the new entry or show one twice.
			w.cache.index = prev.index
		}
		w.began = time.Now()
	}
	tr, err := w.t.Tree(disk.FSTreeObjectID)
	if err != nil {
		return nil, err
	}
	return &wctx{fsys: fsys, tx: w.t.Trans(), tr: tr, top: tr, gen: w.t.Generation(), rootDir: fsys.top.dirID, t: w.t, cache: w.cache, clock: w.opts.Now}, nil
}

// wctx is what one change works with: the engine transaction, the
// subvolume tree, the transaction id and the subvolume's root directory.
type wctx struct {
	fsys    *FS // the filesystem the change is made to
	tx      *ctree.Trans
	tr      *ctree.Tree // the subvolume tree the last path resolved into
	top     *ctree.Tree // the top-level subvolume's tree, where paths start
	gen     disk.Generation
	rootDir disk.ObjectID
	t       *txn.Txn // the running transaction, for data extents and refs
	cache   *txCache // the writer's cache for the running transaction
	clock   func() time.Time
	// logFile is set by a change that is a plain data write to this
	// file: the tree log can describe it (sync_log.go). logOps are the
	// file extent items the change set or deleted, in order.
	logFile *dirKey
	logOps  []logOp
	// gate, for a change run in parallel with others, reserves the data
	// space it checked (checkDataSpace); reserved is what it holds.
	gate     *spaceGate
	reserved uint64
	// readOnly is set while the change resolves a path it only reads
	// (lookupReadOnly): read-only subvolumes may be entered then.
	readOnly bool
	// pins, for a change of a parallel run, are the directories its
	// paths led to before the run (walkDirs), by path; recordPins is
	// set while they are found, before the run.
	pins       map[string]wdir
	recordPins bool
	// dirMove is set by a rename's resolve (changeRename) when it
	// renames a directory: dirMoveAcross when one moves to another
	// parent.
	dirMove dirMove
}

// dirMove is what a rename does to directories (wctx.dirMove).
type dirMove uint8

const (
	noDirMove     dirMove = iota
	dirMoveSame           // a directory renamed in its parent
	dirMoveAcross         // a directory moved to another parent
)

// now is the time changes are stamped with: Options.Now, or the real clock.
func (c *wctx) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

// now is the writer's clock outside a change.
func (fsys *FS) now() time.Time {
	if fsys.w != nil && fsys.w.opts.Now != nil {
		return fsys.w.opts.Now()
	}
	return time.Now()
}
