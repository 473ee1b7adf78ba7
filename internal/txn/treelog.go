package txn

import (
	"errors"
	"fmt"
	"slices"

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
	buf    []byte // for writeRuns
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
	if err := t.logInode(root, ino, items, csums); err != nil {
		l.broken = err
		return fmt.Errorf("%w: %w", ErrNotLogged, err)
	}
	return nil
}

func (t *Txn) logInode(root, ino disk.ObjectID, items []LogItem, csums [][2]uint64) error {
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

// SyncLog makes the log durable: the data written behind so far, the
// log's blocks, then the primary superblock of every device, which is the
// last commit's with log_root pointing at the log root tree (the kernel
// writes only the primary copy for a log, too). The last commit must be
// durable before (the caller finishes the flights first; SyncLog checks).
// A failure leaves the FS broken, as a failed commit does: the primary
// superblocks may be old or new.
func (t *Txn) SyncLog() error {
	l := t.log
	if t.done || l == nil || l.root == nil {
		return fmt.Errorf("txn: no log to sync")
	}
	if l.broken != nil {
		return fmt.Errorf("%w: %w", ErrNotLogged, l.broken)
	}
	if err := t.chunksChanged(); err != nil {
		// Items logged before the chunk was made reference the old
		// chunks only, but the blocks this sync copies could land in
		// the new one.
		return err
	}
	fs := t.fs
	fs.flightMu.Lock()
	inFlight := fs.flight != nil
	fs.flightMu.Unlock()
	if inFlight {
		return fmt.Errorf("txn: log sync with a commit on its way")
	}
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
			return fmt.Errorf("%w: %w", ErrNotLogged, err)
		}
	}
	if _, err := l.tx.WriteDirty(); err != nil {
		l.broken = err
		return fmt.Errorf("%w: %w", ErrNotLogged, err)
	}
	if err := t.FlushData(); err != nil {
		return fmt.Errorf("log sync: write data: %w", err)
	}
	addrs := sortedAddrs(l.pending)
	if err := fs.writeRuns(&l.buf, int(fs.sb.NodeSize), addrs, l.pending); err != nil {
		fs.setBroken(err)
		return fmt.Errorf("log sync: write log blocks: %w", err)
	}
	clear(l.pending)
	sb := fs.sb
	rr := l.root.Root()
	sb.LogRoot, sb.LogRootLevel, sb.LogRootTransID = rr.Addr, uint8(rr.Level), 0
	l.synced = true
	if err := fs.writePrimarySupers(&sb); err != nil {
		fs.setBroken(err)
		return fmt.Errorf("log sync: write superblocks: %w", err)
	}
	fs.counters.logSyncs.Add(1)
	// The superblock names the new log: the blocks the old one used and
	// this one does not are free again.
	t.mu.Lock()
	for _, a := range l.freed {
		delete(l.owned, a)
		if err := fs.space.Release(uint64(a), uint64(fs.sb.NodeSize)); err != nil && l.broken == nil {
			l.broken = fmt.Errorf("txn: release log block %d: %w", a, err)
		}
		t.touch(uint64(a))
	}
	t.mu.Unlock()
	l.freed = l.freed[:0]
	return nil
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

// dropLog ends the log at a commit: every block it holds or held is
// pinned until the commit is durable (a durable superblock may name the
// log until then). Called at the start of Prepare, with the free-space
// model the caller's.
func (t *Txn) dropLog() {
	l := t.log
	if l == nil {
		return
	}
	t.log = nil
	t.mu.Lock()
	defer t.mu.Unlock()
	for a := range l.owned {
		if err := t.fs.space.Free(uint64(a), uint64(t.fs.sb.NodeSize)); err != nil && t.err == nil {
			t.err = fmt.Errorf("free log block %d: %w", a, err)
		}
		t.touch(uint64(a))
	}
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
