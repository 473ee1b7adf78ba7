package txn

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// The tree log (the kernel's tree-log, docs/design/0019): an fsync of a
// file whose transaction holds only data writes does not commit. The
// file's inode item and the file extent items this transaction wrote go
// into a log tree of its subvolume, with the checksums of their data; the
// log's blocks, the data and then the primary superblock, now pointing at
// the log root tree (log_root), are written and synced. The superblock is
// otherwise the last commit's: a mount after a crash replays the log over
// the last commit, as the kernel does, and the next commit leaves log_root
// at zero, which makes the log garbage.
//
// What keeps it consistent:
//   - The log builds on the last commit, which must be durable before the
//     superblock names the log (SyncLog waits for the commits on their
//     way). It may reference only chunks that commit knows: a transaction
//     that added a chunk does not log (ErrNotLogged), and log blocks are
//     never allocated in a new chunk.
//   - Log blocks are allocated in the free-space model like any block, so
//     nothing else is put there, but the extent tree never records them,
//     as the kernel's log blocks. A block the log stops using is kept
//     until the next log superblock is durable (the last one may still
//     point at it); the next commit pins every log block until it is
//     durable itself.
//   - Data extents the log references were allocated in this transaction
//     and are not released before its commit (txn data bookkeeping), so
//     no other write lands on them while a durable log points there.
//   - A failure while changing the log in memory leaves it unusable for
//     the rest of the transaction (every later fsync commits); the last
//     durable log is untouched.

// ErrNotLogged is returned by LogInode when the change cannot go through
// the log; the caller commits instead.
var ErrNotLogged = errors.New("txn: change cannot be logged")

// chunksChanged returns an error matching ErrNotLogged when the
// transaction added, cut or removed a chunk: a log may only name what the
// last commit's chunk tree maps.
func (t *Txn) chunksChanged() error {
	if g := t.growthOf(); g != nil && (len(g.chunks) > 0 || g.shrunk != nil) {
		return fmt.Errorf("%w: the transaction changed the chunks", ErrNotLogged)
	}
	return nil
}

// LogItem is one item to put in the log.
type LogItem struct {
	Key  disk.Key
	Data []byte
}

// treeLog is the running transaction's log.
type treeLog struct {
	tx    *ctree.Trans                  // the log's engine transaction: same generation, own dirty set
	root  *ctree.Tree                   // the log root tree
	trees map[disk.ObjectID]*ctree.Tree // the log tree of each subvolume
	// pending are blocks written out (checksummed) since the last sync.
	pending map[disk.LogicalAddr][]byte
	// owned are the blocks allocated for the log and not given back.
	owned map[disk.LogicalAddr]bool
	// freed are blocks the log stopped using since the last sync: the
	// durable log may still point at them.
	freed []disk.LogicalAddr
	// csums are the data ranges whose checksums the log holds.
	csums alloc.Extents
	// synced is set once a superblock naming this log may be on disk.
	synced bool
	// broken is set when a change to the log failed half way.
	broken error
	// last is the newest log sync handed to the devices; waiting are
	// those whose freed blocks are not released yet (releaseDone).
	last    *LogFlight
	waiting []*LogFlight
}

// logStore is the ctree.Store of the log's blocks.
type logStore struct{ t *Txn }

// Params implements ctree.Store.
func (s logStore) Params() ctree.Params { return s.t.Params() }

// ReadBlock implements ctree.Reader. Every block of the log is made in
// this transaction and stays in the engine's table, so nothing is read
// from the devices; this serves a block the table dropped, if any.
func (s logStore) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	l := s.t.log
	if b, ok := l.pending[addr]; ok {
		return disk.Node(append([]byte(nil), b...)), nil
	}
	return nil, fmt.Errorf("txn: log block %d not in memory", addr)
}

// Alloc implements ctree.Store: a METADATA block in a chunk the last
// commit knows; no new chunk is made for the log.
func (s logStore) Alloc(owner disk.ObjectID, level int, hint disk.LogicalAddr) (disk.LogicalAddr, error) {
	t := s.t
	if err := t.chunksChanged(); err != nil {
		// A chunk made since the log began: the new block might land
		// in it, where a replay could not find it.
		return 0, err
	}
	ns := uint64(t.fs.sb.NodeSize)
	t.mu.Lock()
	defer t.mu.Unlock()
	a, err := t.fs.space.Alloc(disk.BlockGroupMetadata, ns, ns)
	if err != nil {
		return 0, fmt.Errorf("%w: log block: %w", ErrNotLogged, err)
	}
	t.touch(a)
	t.log.owned[disk.LogicalAddr(a)] = true
	return disk.LogicalAddr(a), nil
}

// Free implements ctree.Store.
func (s logStore) Free(addr disk.LogicalAddr, reuse bool) {
	t := s.t
	l := t.log
	delete(l.pending, addr)
	if !reuse {
		l.freed = append(l.freed, addr)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(l.owned, addr)
	if err := t.fs.space.Release(uint64(addr), uint64(t.fs.sb.NodeSize)); err != nil && l.broken == nil {
		l.broken = fmt.Errorf("txn: free log block %d: %w", addr, err)
	}
	t.touch(uint64(addr))
}

// Write implements ctree.Store.
func (s logStore) Write(addr disk.LogicalAddr, block []byte) error {
	t := s.t
	if !t.log.owned[addr] {
		return fmt.Errorf("txn: write to log block %d not allocated for the log", addr)
	}
	t.fs.sb.CsumType.SumBlock(block)
	t.log.pending[addr] = block
	return nil
}

// LogInode puts ino of subvolume tree root into the log: items (sorted,
// the inode's INODE_ITEM and the EXTENT_DATA items to replay) replace
// whatever the log held for ino, and the checksums of the data ranges
// csums (start, end pairs of logical addresses) are copied from the
// running csum tree, but for ranges logged before. It returns an error
// matching ErrNotLogged when the transaction cannot log (a new chunk, no
// room for log blocks, an earlier failure); the log as last synced stays
// valid. Preconditions: no other tree operation of this transaction runs.
func (t *Txn) LogInode(root, ino disk.ObjectID, items []LogItem, csums [][2]uint64) error {
	return t.logInodeMode(root, ino, items, csums, false)
}

// LogInodeRebuilt is LogInode that first deletes every item of ino from
// the log, then inserts items (all of the inode's items, in key order),
// as the kernel of the seed patch's time logged an fsynced inode. For
// measurement only (the shortcut share of a log rebuilt per fsync): the
// log it makes is as valid, and bigger to write.
func (t *Txn) LogInodeRebuilt(root, ino disk.ObjectID, items []LogItem, csums [][2]uint64) error {
	return t.logInodeMode(root, ino, items, csums, true)
}

func (t *Txn) logInodeMode(root, ino disk.ObjectID, items []LogItem, csums [][2]uint64, rebuild bool) error {
	if t.done {
		return fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	if err := t.chunksChanged(); err != nil {
		return err
	}
	if t.log == nil {
		t.log = &treeLog{trees: map[disk.ObjectID]*ctree.Tree{}, pending: map[disk.LogicalAddr][]byte{},
			owned: map[disk.LogicalAddr]bool{}}
		t.log.tx = ctree.NewTrans(logStore{t}, t.gen, nil)
	}
	l := t.log
	if l.broken != nil {
		return fmt.Errorf("%w: %w", ErrNotLogged, l.broken)
	}
	t.releaseDone()
	if err := t.logInode(root, ino, items, csums, rebuild); err != nil {
		l.broken = err
		return fmt.Errorf("%w: %w", ErrNotLogged, err)
	}
	return nil
}

func (t *Txn) logInode(root, ino disk.ObjectID, items []LogItem, csums [][2]uint64, rebuild bool) error {
	l := t.log
	opts := t.fs.treeOptions(disk.TreeLogObjectID)
	if l.root == nil {
		r, err := ctree.Create(l.tx, disk.TreeLogObjectID, opts)
		if err != nil {
			return err
		}
		l.root = r
	}
	lt := l.trees[root]
	if lt == nil {
		var err error
		if lt, err = ctree.Create(l.tx, disk.TreeLogObjectID, opts); err != nil {
			return err
		}
		l.trees[root] = lt
	}
	if rebuild {
		first := disk.Key{ObjectID: ino}
		last := disk.Key{ObjectID: ino, Type: ^disk.KeyType(0), Offset: ^uint64(0)}
		if _, err := lt.DeleteRange(l.tx, first, last); err != nil {
			return err
		}
		// In key order, one at a time: each goes past the last one, as
		// the kernel's copy of an inode's leaves did.
		for _, it := range items {
			if it.Key.ObjectID != ino || it.Data == nil {
				return fmt.Errorf("txn: log item %v of inode %d", it.Key, ino)
			}
			if err := lt.InsertItem(l.tx, it.Key, it.Data); err != nil {
				return err
			}
		}
		return t.logCsums(lt, csums)
	}
	for _, it := range items {
		if it.Key.ObjectID != ino {
			return fmt.Errorf("txn: log item %v of inode %d", it.Key, ino)
		}
		if err := putLogItem(l.tx, lt, it); err != nil {
			return err
		}
	}
	return t.logCsums(lt, csums)
}

// putLogItem sets (or, with nil Data, deletes) one item of log tree lt.
func putLogItem(tx *ctree.Trans, lt *ctree.Tree, it LogItem) error {
	if it.Data == nil {
		_, err := lt.DeleteItem(tx, it.Key)
		return err
	}
	err := lt.UpdateItem(tx, it.Key, func(data []byte) error {
		if len(data) != len(it.Data) {
			return errResize
		}
		copy(data, it.Data)
		return nil
	})
	if errors.Is(err, errResize) {
		if _, err = lt.DeleteItem(tx, it.Key); err != nil {
			return err
		}
		err = ctree.ErrNotFound
	}
	if errors.Is(err, ctree.ErrNotFound) {
		err = lt.InsertItem(tx, it.Key, it.Data)
	}
	return err
}

// errResize tells putLogItem that an item changes size.
var errResize = errors.New("txn: log item changes size")

// logCsums copies the checksums of the ranges into log tree lt, but for
// parts an earlier LogInode copied: the data of an extent never changes,
// so those are still right.
func (t *Txn) logCsums(lt *ctree.Tree, ranges [][2]uint64) error {
	l := t.log
	cs := t.fs.sb.CsumType.Size()
	sector := uint64(t.fs.sb.SectorSize)
	var todo alloc.Extents
	for _, r := range ranges {
		for _, g := range l.csums.Gaps(r[0], r[1]) {
			todo.Insert(g.Start, g.End)
		}
	}
	if todo.Len() == 0 {
		return nil
	}
	ct, err := t.Tree(disk.CsumTreeObjectID)
	if err != nil {
		return err
	}
	per := uint64(t.maxCsumsPerItem())
	for r := range todo.All() {
		runs, err := t.csumItemsAround(ct, r.Start, r.End)
		if err != nil {
			return err
		}
		covered := r.Start
		for _, run := range runs {
			lo, hi := max(run.start, r.Start), min(run.end(cs, sector), r.End)
			if lo >= hi {
				continue
			}
			if lo != covered {
				return fmt.Errorf("txn: no checksums for data [%d, %d) to log", covered, lo)
			}
			for a := lo; a < hi; {
				n := min((hi-a)/sector, per)
				off := (a - run.start) / sector * uint64(cs)
				sums := run.sums[off : off+n*uint64(cs)]
				if err := lt.InsertItem(l.tx, csumKey(a), slices.Clone(sums)); err != nil {
					return err
				}
				a += n * sector
			}
			covered = hi
		}
		if covered != r.End {
			return fmt.Errorf("txn: no checksums for data [%d, %d) to log", covered, r.End)
		}
		l.csums.Insert(r.Start, r.End)
	}
	return nil
}

// PrepareLog hands the log as it is now to the devices: it brings the log
// root tree up to date, checksums the blocks changed since the last
// PrepareLog, and returns the LogFlight that writes them, the data written
// behind so far, and then the primary superblock of every device: the
// last commit's, with log_root pointing at the log root tree (the kernel
// writes only the primary copy for a log, too). It runs under the
// caller's lock, as LogInode; LogFlight.Finish runs without it, so
// changes go on while the devices sync. The last commit must be durable
// (the caller finishes the commit flights first; PrepareLog checks).
func (t *Txn) PrepareLog() (*LogFlight, error) {
	l := t.log
	if t.done || l == nil || l.root == nil {
		return nil, fmt.Errorf("txn: no log to sync")
	}
	if l.broken != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotLogged, l.broken)
	}
	if err := t.chunksChanged(); err != nil {
		// Items logged before the chunk was made reference the old
		// chunks only, but the blocks this sync copies could land in
		// the new one.
		return nil, err
	}
	fs := t.fs
	fs.flightMu.Lock()
	inFlight := fs.flight != nil
	fs.flightMu.Unlock()
	if inFlight {
		return nil, fmt.Errorf("txn: log sync with a commit on its way")
	}
	t.releaseDone()
	// The log root tree names each subvolume's log root.
	ids := make([]disk.ObjectID, 0, len(l.trees))
	for id := range l.trees {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := l.trees[id].Root()
		item := logRootItem(r, fs.sb.NodeSize)
		buf := make([]byte, item.Size())
		item.Encode(buf)
		k := disk.Key{ObjectID: disk.TreeLogObjectID, Type: disk.RootItemKey, Offset: uint64(id)}
		err := l.root.UpdateItem(l.tx, k, func(data []byte) error {
			if len(data) != len(buf) {
				return fmt.Errorf("txn: log root item of %d bytes", len(data))
			}
			copy(data, buf)
			return nil
		})
		if errors.Is(err, ctree.ErrNotFound) {
			err = l.root.InsertItem(l.tx, k, buf)
		}
		if err != nil {
			l.broken = err
			return nil, fmt.Errorf("%w: %w", ErrNotLogged, err)
		}
	}
	if _, err := l.tx.WriteDirty(); err != nil {
		l.broken = err
		return nil, fmt.Errorf("%w: %w", ErrNotLogged, err)
	}
	sb := fs.sb
	rr := l.root.Root()
	sb.LogRoot, sb.LogRootLevel, sb.LogRootTransID = rr.Addr, uint8(rr.Level), 0
	f := &LogFlight{fs: fs, prev: l.last, addrs: sortedAddrs(l.pending), blocks: l.pending, sb: sb,
		data: &t.wb, freed: l.freed, done: make(chan struct{})}
	l.pending, l.freed = map[disk.LogicalAddr][]byte{}, nil
	l.last = f
	l.waiting = append(l.waiting, f)
	l.synced = true
	return f, nil
}

// LogFlight is a log sync on its way to the devices (PrepareLog).
type LogFlight struct {
	fs     *FS
	prev   *LogFlight // the log sync before it, durable first
	addrs  []disk.LogicalAddr
	blocks map[disk.LogicalAddr][]byte
	sb     disk.Superblock
	data   *writeBehind
	// freed are log blocks the log stopped using before this sync: free
	// again once its superblock is durable (releaseDone).
	freed []disk.LogicalAddr

	once sync.Once
	done chan struct{}
	err  error
}

// Finish makes the log sync durable: the log syncs before it first, then
// the data written behind, the log's blocks, a sync, the primary
// superblocks, a sync. Any number of goroutines may call it; all return
// when it is durable or failed, with the same error. A failure leaves the
// FS broken, as a failed commit does: the primary superblocks may be old
// or new.
func (f *LogFlight) Finish() error {
	f.once.Do(func() {
		defer close(f.done)
		if f.prev != nil {
			if err := f.prev.Finish(); err != nil {
				f.err = err
				return
			}
			f.prev = nil
		}
		fs := f.fs
		fs.logMu.Lock()
		defer fs.logMu.Unlock()
		if err := f.data.flush(); err != nil {
			f.err = fmt.Errorf("log sync: write data: %w", err)
		} else if err := fs.writeRuns(&fs.logBuf, int(f.sb.NodeSize), f.addrs, f.blocks); err != nil {
			f.err = fmt.Errorf("log sync: write log blocks: %w", err)
		} else if err := fs.writePrimarySupers(&f.sb); err != nil {
			f.err = fmt.Errorf("log sync: write superblocks: %w", err)
		}
		if f.err != nil {
			fs.setBroken(f.err)
			return
		}
		f.blocks = nil
		fs.counters.logSyncs.Add(1)
	})
	<-f.done
	return f.err
}

// finished reports whether Finish has run to its end, with its error.
func (f *LogFlight) finished() (bool, error) {
	select {
	case <-f.done:
		return true, f.err
	default:
		return false, nil
	}
}

// releaseDone makes the blocks freed before each durable log sync free
// again: no durable superblock names a log that uses them. Called under
// the caller's lock (LogInode, PrepareLog).
func (t *Txn) releaseDone() {
	l := t.log
	n := 0
	for _, f := range l.waiting {
		if ok, err := f.finished(); !ok || err != nil {
			break // in order: a later one cannot be durable first
		}
		t.mu.Lock()
		for _, a := range f.freed {
			delete(l.owned, a)
			if err := t.fs.space.Release(uint64(a), uint64(t.fs.sb.NodeSize)); err != nil && l.broken == nil {
				l.broken = fmt.Errorf("txn: release log block %d: %w", a, err)
			}
			t.touch(uint64(a))
		}
		t.mu.Unlock()
		n++
	}
	l.waiting = l.waiting[n:]
}

// logRootItem is the ROOT_ITEM of a subvolume's log tree in the log root
// tree; replay reads its bytenr, level and generation. The inode fields
// are those the kernel gives a log root.
func logRootItem(r ctree.Root, nodesize uint32) disk.RootItem {
	ri := disk.RootItem{Generation: r.Generation, GenerationV2: r.Generation, Bytenr: r.Addr, Level: uint8(r.Level)}
	ri.Inode.Generation = 1
	ri.Inode.Size = 3
	ri.Inode.NLink = 1
	ri.Inode.NBytes = uint64(nodesize)
	ri.Inode.Mode = 0o40755
	return ri
}

// dropLog ends the log at a commit: the log syncs on their way finish
// first (the commit's superblock must come after theirs), then every
// block the log holds or held is pinned until the commit is durable (a
// durable superblock may name the log until then). Called at the start
// of Prepare, with the free-space model the caller's.
func (t *Txn) dropLog() error {
	l := t.log
	if l == nil {
		return nil
	}
	t.log = nil
	if l.last != nil {
		if err := l.last.Finish(); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for a := range l.owned {
		if err := t.fs.space.Free(uint64(a), uint64(t.fs.sb.NodeSize)); err != nil && t.err == nil {
			t.err = fmt.Errorf("free log block %d: %w", a, err)
		}
		t.touch(uint64(a))
	}
	return nil
}

// abortLog is dropLog for an aborted transaction: a superblock that names
// the log may be durable, and the image must be as the last commit left
// it, so the primary superblocks are written again without the log.
func (t *Txn) abortLog() {
	l := t.log
	t.log = nil
	if l == nil || !l.synced {
		return
	}
	if l.last != nil {
		l.last.Finish() // a failure leaves the FS broken already
	}
	// No commit can have been prepared since the log was synced (it
	// waited for those before), but make sure sb is durable first.
	if err := t.fs.WaitFlights(); err != nil {
		return
	}
	sb := t.fs.sb
	sb.LogRoot, sb.LogRootLevel, sb.LogRootTransID = 0, 0, 0
	if err := t.fs.writePrimarySupers(&sb); err != nil {
		t.fs.setBroken(fmt.Errorf("aborted transaction: remove its log from the superblock: %w", err))
	}
}

// writePrimarySupers writes sb to the primary superblock copy of every
// device, between two syncs, with each device's dev_item as it is now (a
// running transaction changes dev_items only in its Prepare).
func (fs *FS) writePrimarySupers(sb *disk.Superblock) error {
	for _, m := range fs.set.Members {
		if err := m.Device.Sync(); err != nil {
			return err
		}
	}
	buf := make([]byte, disk.SuperblockSize)
	for _, m := range fs.set.Members {
		c := *sb
		c.Bytenr = disk.SuperblockOffsetOf(0)
		c.DevItem = m.Super.DevItem
		c.Encode(buf)
		sb.CsumType.SumBlock(buf)
		if _, err := m.Device.WriteAt(buf, int64(c.Bytenr)); err != nil {
			return fmt.Errorf("device %d superblock 0: %w", m.DevID(), err)
		}
	}
	for _, m := range fs.set.Members {
		if err := m.Device.Sync(); err != nil {
			return err
		}
	}
	return nil
}
