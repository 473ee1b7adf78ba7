package btrfs

import (
	"fmt"
	"io/fs"
	"time"

	"github.com/gobtrfs/btrfs/internal/txn"
)

// Durability of a writable FS (docs/design/0009-live-filesystem.md): a
// change is durable once a commit that began after it has finished.
// Sync and File.Sync wait for that; the background committer and the
// dirty limit start commits on their own, as the kernel's commit= interval
// and its dirty-page writeback do; Close commits.

// defaultCommitInterval is the kernel's default commit= interval.
const defaultCommitInterval = 30 * time.Second

// commitInterval is how often the background committer runs (0: never).
func (o *Options) commitInterval() time.Duration {
	switch {
	case o.CommitInterval < 0:
		return 0
	case o.CommitInterval == 0:
		return defaultCommitInterval
	}
	return o.CommitInterval
}

// dirtyLimit is the bytes a transaction may hold before a change commits
// it (0: no limit): a tenth of the machine's memory by default, as the
// kernel's dirty_background_ratio, and at least 32 MiB.
func (o *Options) dirtyLimit() uint64 {
	switch {
	case o.DirtyLimit < 0:
		return 0
	case o.DirtyLimit > 0:
		return uint64(o.DirtyLimit)
	}
	return max(physicalMemory()/10, 32<<20)
}

// Sync makes every change made before the call durable: it returns once a
// commit that began after them has finished. Concurrent calls share
// commits (group commit): many goroutines syncing at once cost about one
// commit, not one each. On a read-only FS it does nothing.
func (fsys *FS) Sync() error {
	w := fsys.w
	if w == nil {
		return nil
	}
	target := w.seq.Load()
	for {
		if w.durable.Load() >= target {
			return nil // a commit that began after our changes has finished
		}
		w.mu.Lock()
		if w.dead != nil {
			w.mu.Unlock()
			return &fs.PathError{Op: "sync", Path: w.path, Err: ErrAborted}
		}
		f, seq := w.flight, w.flightSeq
		if f != nil && seq >= target {
			// A commit on its way covers our changes.
			w.mu.Unlock()
			return fsys.finish(f, seq)
		}
		if f != nil && w.durable.Load() < seq {
			// A commit without our changes is on its way: wait for it,
			// then commit once for every Sync that waited meanwhile
			// (group commit; the kernel's fsync that must commit also
			// waits for the commit in progress first). Committing at
			// once instead would queue one commit per Sync behind it,
			// each paying for its own device syncs.
			w.mu.Unlock()
			if err := fsys.finish(f, seq); err != nil {
				return err
			}
			continue
		}
		f, seq, err := fsys.commitLocked()
		w.mu.Unlock()
		if err != nil {
			return err
		}
		// The devices sync without the lock: changes go on meanwhile,
		// and every Sync covered by this commit waits for the same
		// flight.
		return fsys.finish(f, seq)
	}
}

// Sync makes the file's data and metadata durable, as fsync(2). When the
// running transaction holds only data writes to files that existed at the
// last commit, the file goes to the tree log, as the kernel's fsync does
// (sync_log.go; Options.NoTreeLog turns it off); otherwise this is
// FS.Sync, a commit of everything, and concurrent Syncs share commits.
func (f *File) Sync() error {
	sv, ino := f.identity()
	if done, err := f.fsys.syncLogged(sv, ino); done {
		if err != nil {
			return f.pathErr("sync", err)
		}
		return nil
	}
	if err := f.fsys.Sync(); err != nil {
		return f.pathErr("sync", err)
	}
	return nil
}

// Rollback drops every change since the last commit: the FS shows the last
// commit again and takes new changes. After a change failed half way the
// changes are already gone and the FS is aborted for good (ErrAborted, as
// the kernel after a transaction abort); Rollback then does nothing.
func (fsys *FS) Rollback() error {
	w, err := fsys.writable("rollback", ".")
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead == nil && w.t != nil {
		w.t.Abort()
		w.t = nil
		fsys.showCommitted()
	}
	return nil
}

// startCommitter runs the background commits of w every interval: a
// transaction older than the interval is committed. It stops when stop is
// closed, and closes done then.
func (fsys *FS) startCommitter(interval time.Duration) {
	w := fsys.w
	w.stop, w.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.stopped)
		// Look four times an interval, at most every millisecond (a
		// zero ticker period would panic).
		tick := time.NewTicker(max(interval/4, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			w.mu.Lock()
			var (
				f   *txn.Flight
				seq uint64
				err error
			)
			if w.t != nil && w.dead == nil && time.Since(w.began) >= interval {
				f, seq, err = fsys.commitLocked()
			}
			w.mu.Unlock()
			if err == nil {
				err = fsys.finish(f, seq)
			}
			if err != nil {
				w.mu.Lock()
				if w.bgErr == nil {
					w.bgErr = err // reported by Close; later changes see ErrAborted
				}
				w.mu.Unlock()
			}
		}
	}()
}

// closeWriter is Close of a writable FS: it stops the background commits,
// commits what is pending, and closes the devices.
func (w *writer) closeWriter(fsys *FS) error {
	if w.stop != nil {
		close(w.stop)
		<-w.stopped
		w.stop = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	if w.dead == nil {
		err = fsys.commitDurableLocked()
	}
	if err == nil && w.bgErr != nil {
		err = fmt.Errorf("background commit: %w", w.bgErr)
	}
	if w.t != nil {
		w.t.Abort()
		w.t = nil
	}
	if cerr := w.tfs.Close(); err == nil {
		err = cerr
	}
	return err
}
