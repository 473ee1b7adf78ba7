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

// maxPasses bounds the fixpoint of Commit: every pass after the first only
// has the few blocks the previous pass copied to account for, and those
// are private (changed in place) afterwards, so a handful suffice.
const maxPasses = 64

// errNoFixpoint means the commit's bookkeeping kept allocating blocks.
var errNoFixpoint = errors.New("txn: commit bookkeeping did not reach a fixpoint")

// step is one named stage of Commit.
type step struct {
	name string
	run  func() error
}

// Commit makes the transaction durable: Prepare, then Finish, then the
// bytes freed in this transaction are allocatable again. On an error
// before the superblocks are written the filesystem on disk is unchanged
// and the transaction is aborted. Preconditions: no tree operation of this
// transaction runs concurrently.
func (t *Txn) Commit() error {
	f, err := t.Prepare()
	if err != nil {
		return err
	}
	if err := f.Finish(); err != nil {
		return err
	}
	t.fs.ReleaseDurable()
	return nil
}

// SetRootTime sets the ctime that the commit gives every subvolume this
// transaction changed (settleRoots), and so turns that stamping on: the
// writer calls it with its clock before it commits its changes.
func (t *Txn) SetRootTime(ts disk.Timespec) { t.rootTime = &ts }

// isSubvolTree reports whether tree id is a subvolume's (the top level
// or one made by subvolume create or snapshot).
func isSubvolTree(id disk.ObjectID) bool {
	return id == disk.FSTreeObjectID || id >= disk.FirstFreeObjectID && id <= disk.LastFreeObjectID
}

// Prepare is the part of a commit that needs the transaction to itself:
// it settles the extent tree, block group items, free-space tree and root
// items to a fixpoint, writes every data and tree block to every copy
// (not synced), and makes the new superblock. Then the transaction has
// ended and the next may Begin, while Finish makes this one durable: the
// next reads this one's blocks from the devices, where they already are,
// and cannot allocate what this one freed until Finish is done and
// ReleaseDurable has run (docs/design/0009, stage 2). On an error the
// transaction is aborted and the disk is as the last commit left it.
func (t *Txn) Prepare() (*Flight, error) {
	if t.done {
		return nil, fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	if t.err != nil {
		err := t.err
		t.Abort()
		return nil, err
	}
	t.fs.ReleaseDurable()
	// The log ends with this commit, whose superblock names none.
	if err := t.dropLog(); err != nil {
		t.Abort()
		return nil, fmt.Errorf("commit %d: finish the log: %w", t.gen, err)
	}
	var sb disk.Superblock
	// The data written behind goes out while the bookkeeping runs (it
	// touches no data); it must be on the devices before they are
	// synced, so it is waited for before the tree blocks.
	t.wb.start()
	// With a block cache the flight waits for the data (Flight.landData)
	// outside the lock, as it writes the tree blocks; readers of the
	// committed data wait for it through FS.LandData.
	deferData := t.fs.cache != nil
	writeData := t.FlushData
	if deferData {
		writeData = t.wb.failed
	}
	pre := []step{
		{"convert v1 space cache", t.convertSpaceCacheV1},
		{"mark quota inconsistent", t.markQuotaInconsistent},
		{"settle metadata", t.settle},
		{"write data", writeData},
		{"write tree blocks", t.writeBlocks},
		{"prepare superblock", func() (err error) {
			if sb, err = t.newSuper(); err == nil {
				err = t.growSuper(&sb)
			}
			return err
		}},
	}
	for _, s := range pre {
		if err := s.run(); err != nil {
			t.Abort()
			return nil, fmt.Errorf("commit %d: %s: %w", t.gen, s.name, err)
		}
	}
	t.growDevices()
	t.endGrowth()
	t.done = true
	if !deferData {
		t.wb.discard() // everything staged went out in "write data"; keep the buffers
	}
	fs := t.fs
	fs.running = nil
	f := &Flight{fs: fs, gen: t.gen, sb: sb, devItems: fs.devItemsNow(), pins: fs.space.Seal(), done: make(chan struct{}),
		addrs: t.sealed, blocks: t.pending}
	if deferData {
		f.data = &t.wb
	}
	fs.flightMu.Lock()
	f.prev, fs.flight = fs.flight, f
	fs.flightMu.Unlock()
	// The next transaction builds on this one: its generation, its roots.
	fs.sb = sb
	if t.v1Cleared {
		fs.v1 = nil
	}
	if t.fstCreated {
		fs.hasFST, fs.v1 = true, nil
	}
	if t.quotaMarked {
		fs.markQuota = false
	}
	fs.counters.commits.Add(1)
	return f, nil
}

// Flight is a prepared commit on its way to the disk: its blocks are
// written, its superblock not yet.
type Flight struct {
	fs  *FS
	gen disk.Generation
	sb  disk.Superblock
	// devItems are the devices' dev_items as of the commit.
	devItems map[disk.DevID]disk.DevItem
	pins     alloc.Extents // the bytes its transaction freed
	prev     *Flight       // the commit before it, durable first
	// addrs are the tree blocks Finish writes (in order; empty when
	// Prepare wrote them), blocks their contents, pinned in the FS's
	// block cache until written.
	addrs  []disk.LogicalAddr
	blocks map[disk.LogicalAddr][]byte
	// data, when set, is the transaction's write-behind, whose last
	// buffer may still be on its way to the devices (landData).
	data     *writeBehind
	landOnce sync.Once
	landErr  error

	once sync.Once
	done chan struct{} // closed when Finish has run
	err  error
}

// Generation is the transaction id of the commit.
func (f *Flight) Generation() disk.Generation { return f.gen }

// Finish makes the commit durable: the commits before it first, then a
// sync of every device, the superblocks, and a sync again. It is safe to
// call from any goroutine and any number of times, also beside a running
// transaction and beside the next commit's Prepare; every call returns
// when the commit is durable (or failed), with the same error. A failure
// leaves the FS broken: some superblocks may be new and some old, and
// memory matches neither for sure.
func (f *Flight) Finish() error {
	f.once.Do(func() {
		defer close(f.done)
		if f.prev != nil {
			if err := f.prev.Finish(); err != nil {
				f.err = fmt.Errorf("commit %d: an earlier commit failed: %w", f.gen, err)
				return
			}
		}
		fs := f.fs
		fs.finishMu.Lock()
		defer fs.finishMu.Unlock()
		if err := f.landData(); err != nil {
			f.err = err
		} else if err := fs.writeRuns(&fs.finishBuf, int(f.sb.NodeSize), f.addrs, f.blocks); err != nil {
			f.err = fmt.Errorf("commit %d: write tree blocks: %w", f.gen, err)
		} else if err := fs.wr.Sync(); err != nil {
			f.err = fmt.Errorf("commit %d: sync tree blocks: %w", f.gen, err)
		} else if err := fs.writeSupers(&f.sb, f.devItems); err != nil {
			f.err = fmt.Errorf("commit %d: write superblocks: %w", f.gen, err)
		}
		fs.flightMu.Lock()
		defer fs.flightMu.Unlock()
		if f.err != nil {
			if fs.broken == nil {
				fs.broken = f.err
			}
			return
		}
		if fs.cache != nil && len(f.addrs) > 0 {
			// On the devices now: the cache may let them go.
			fs.cache.Unpin(f.addrs)
		}
		f.addrs, f.blocks = nil, nil
		fs.durable = append(fs.durable, f.pins)
		if fs.flight == f {
			fs.flight = nil
		}
		f.prev = nil // let the chain be collected
	})
	<-f.done
	return f.err
}

// landData waits until the flight's data is on the devices (written, not
// synced) and gives its staging buffers back; every call returns the
// same error.
func (f *Flight) landData() error {
	f.landOnce.Do(func() {
		if f.data == nil {
			return
		}
		if err := f.data.flush(); err != nil {
			f.landErr = fmt.Errorf("commit %d: write data: %w", f.gen, err)
		}
		f.data.discard()
	})
	return f.landErr
}

// LandData waits until the data of every prepared commit is on the
// devices (written, maybe not synced), oldest commit first, so that
// reading the devices shows it. The filesystem's read side calls it
// before it reads file data.
func (fs *FS) LandData() error { return fs.landDataBefore(^disk.Generation(0)) }

// landDataBefore is LandData for the commits older than generation gen:
// a transaction's own data writes wait for those (Begin), never for its
// own flight, whose landing waits for them.
func (fs *FS) landDataBefore(gen disk.Generation) error {
	fs.flightMu.Lock()
	var chain []*Flight
	for f := fs.flight; f != nil; f = f.prev {
		if f.gen < gen {
			chain = append(chain, f)
		}
	}
	fs.flightMu.Unlock()
	for i := len(chain) - 1; i >= 0; i-- {
		if err := chain[i].landData(); err != nil {
			return err
		}
	}
	return nil
}

// brokenErr is the error that made the FS unusable, or nil.
func (fs *FS) brokenErr() error {
	fs.flightMu.Lock()
	defer fs.flightMu.Unlock()
	return fs.broken
}

// setBroken records the first error that makes the FS unusable.
func (fs *FS) setBroken(err error) {
	fs.flightMu.Lock()
	defer fs.flightMu.Unlock()
	if fs.broken == nil {
		fs.broken = err
	}
}

// WaitFlights finishes every prepared commit and returns the first error.
func (fs *FS) WaitFlights() error {
	fs.flightMu.Lock()
	f := fs.flight
	fs.flightMu.Unlock()
	if f == nil {
		return nil
	}
	return f.Finish()
}

// ReleaseDurable makes the bytes freed by commits that have finished
// allocatable. It runs where the free-space model is the caller's alone:
// at Begin, in Prepare and after Commit.
func (fs *FS) ReleaseDurable() {
	fs.flightMu.Lock()
	sets := fs.durable
	fs.durable = nil
	fs.flightMu.Unlock()
	for _, set := range sets {
		fs.space.UnpinSet(set)
	}
}

// Abort ends the transaction without writing anything: the free-space
// model is reloaded from the committed extent tree.
func (t *Txn) Abort() {
	if t.done {
		return
	}
	// First of all: a reader that finds Dropped false after it read
	// this transaction's data read it before the staged bytes went.
	t.dropped.Store(true)
	t.done = true
	t.fs.running = nil
	t.abortLog()
	if len(t.sealed) > 0 {
		t.fs.cache.Drop(t.sealed) // put pinned by writeBlocks, never written
	}
	t.wb.discard()
	t.closeData()
	t.dropChunks()
	// The free-space model is rebuilt from the last commit's extent
	// tree, which forgets pinned bytes: commits still on their way must
	// be durable first, or their freed bytes would be handed out early.
	if err := t.fs.WaitFlights(); err != nil {
		return
	}
	t.fs.flightMu.Lock()
	t.fs.durable = nil // the rebuilt model has them free already
	t.fs.flightMu.Unlock()
	if err := t.fs.loadSpace(); err != nil {
		t.fs.setBroken(err)
	}
}

// Dropped reports whether the transaction was aborted (Abort, also a
// failed Prepare). Safe for concurrent use. Its data written behind is
// dropped with it, never written: a reader of its data (ReadStaged, or
// the device where the staged bytes would have gone) that finds Dropped
// true after its read may have read bytes that were never the file's,
// and must read again from a state after the abort; one that finds it
// false read what the transaction wrote.
func (t *Txn) Dropped() bool { return t.dropped.Load() }

// settle runs the bookkeeping steps until a whole pass allocates and frees
// nothing: then every item they maintain describes the final state. The
// items of new chunks are inserted before every step, so each step finds
// the group items of every group it was told about.
func (t *Txn) settle() error {
	steps := []step{
		{"data extents", t.settleData},
		{"extent items", t.settleExtents},
		{"block group items", t.settleBlockGroups},
		{"free space tree", t.settleFST},
		{"root items", t.settleRoots},
	}
	for pass := 0; pass < maxPasses; pass++ {
		before := t.changes
		for _, s := range steps {
			if err := t.settleChunks(); err != nil {
				return fmt.Errorf("new chunks: %w", err)
			}
			if err := s.run(); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			if t.err != nil {
				return fmt.Errorf("%s: %w", s.name, t.err)
			}
		}
		if t.changes == before {
			return nil
		}
	}
	return errNoFixpoint
}

// sortedAddrs returns the keys of m in ascending order.
func sortedAddrs[V any](m map[disk.LogicalAddr]V) []disk.LogicalAddr {
	out := make([]disk.LogicalAddr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// settleExtents deletes the METADATA_ITEM of every freed block and adds one
// for every new live block, repeating while doing so allocates or frees.
func (t *Txn) settleExtents() error {
	et, err := t.Tree(disk.ExtentTreeObjectID)
	if err != nil {
		return err
	}
	for {
		var todo []disk.LogicalAddr
		for a := range t.live {
			if !t.recorded[a] {
				todo = append(todo, a)
			}
		}
		if len(t.gone) == 0 && len(todo) == 0 && len(t.treeRefs) == 0 {
			return nil
		}
		for _, a := range sortedAddrs(t.gone) {
			delete(t.gone, a)
			if d := t.treeRefs[a]; d != nil && (len(d.refs) != 0 || d.setFlags != 0) {
				// A block freed by a copy of its only tree has no
				// other references to change.
				return fmt.Errorf("txn: tree block %d freed with reference changes pending", a)
			}
			if err := t.deleteExtent(et, a); err != nil {
				return err
			}
		}
		slices.Sort(todo)
		for _, a := range todo {
			info, ok := t.live[a]
			if !ok || t.recorded[a] {
				continue // freed or recorded meanwhile
			}
			t.recorded[a] = true
			key, item := t.treeBlockItem(a, info)
			if err := et.InsertItem(t.tx, key, item); err != nil {
				return fmt.Errorf("insert extent item of block %d: %w", a, err)
			}
		}
		if err := t.settleTreeRefs(et); err != nil {
			return err
		}
	}
}

// treeBlockItem is the extent item of a tree block made in this
// transaction, in the form the filesystem uses: one reference, from its
// owner tree. With skinny metadata it is a METADATA_ITEM keyed by level;
// without, an EXTENT_ITEM keyed by the node size whose tree block info
// holds the level and the block's first key (the kernel records the key
// the block had when it was allocated; nothing reads it back but
// dump-tree, so the key it has now serves as well).
func (t *Txn) treeBlockItem(a disk.LogicalAddr, info blockInfo) (disk.Key, []byte) {
	it := disk.ExtentItem{Refs: 1, Generation: t.gen, Flags: disk.ExtentFlagTreeBlock,
		InlineRefs: []disk.InlineRef{{Type: disk.TreeBlockRefKey, Offset: uint64(info.owner)}}}
	key := disk.Key{ObjectID: disk.ObjectID(a), Type: disk.MetadataItemKey, Offset: uint64(info.level)}
	if t.fs.sb.IncompatFlags&disk.IncompatSkinnyMetadata == 0 {
		first, _ := t.tx.FirstKey(a)
		it.TreeBlock = &disk.TreeBlockInfo{Key: first, Level: uint8(info.level)}
		key.Type, key.Offset = disk.ExtentItemKey, uint64(t.fs.sb.NodeSize)
	}
	b := make([]byte, it.Size())
	it.Encode(b)
	return key, b
}

// deleteExtent removes the extent item of the tree block at a, which a
// copy of its only tree freed, and its one reference wherever it is kept
// (inline, or as an item of its own when the kernel put it there while
// the block had many). A block with other references is not freed this
// way: copies of shared blocks go through the delayed references.
func (t *Txn) deleteExtent(et *ctree.Tree, a disk.LogicalAddr) error {
	x, err := t.readTreeExtent(et, a)
	switch {
	case err != nil:
		return err
	case x == nil:
		return disk.Corruptf("tree block %d freed: no extent item", a)
	case x.item.Refs != 1 || x.full():
		return fmt.Errorf("%w: snapshots (freeing tree block %d, shared: refs %d): delete the snapshots with the kernel"+
			" (btrfs subvolume delete) or make this change through the kernel", ErrUnsupported, a, x.item.Refs)
	}
	for _, r := range x.keyed {
		k := disk.Key{ObjectID: disk.ObjectID(a), Type: r.typ, Offset: r.off}
		if _, err := et.DeleteItem(t.tx, k); err != nil {
			return fmt.Errorf("delete %v of block %d: %w", k, a, err)
		}
	}
	if _, err := et.DeleteItem(t.tx, x.key); err != nil {
		return fmt.Errorf("delete extent item of block %d: %w", a, err)
	}
	return nil
}

// touchedGroups returns the start of every touched block group, ascending.
func (t *Txn) touchedGroups() []uint64 {
	out := make([]uint64, 0, len(t.touched))
	for s := range t.touched {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// settleBlockGroups sets used of every touched BLOCK_GROUP_ITEM to alloc's.
func (t *Txn) settleBlockGroups() error {
	bt, err := t.Tree(t.fs.bgTree)
	if err != nil {
		return err
	}
	for _, s := range t.touchedGroups() {
		g := t.fs.space.Group(s)
		key := disk.Key{ObjectID: disk.ObjectID(g.Start), Type: disk.BlockGroupItemKey, Offset: g.Length}
		data, found, err := bt.Lookup(t.tx, key)
		if err != nil {
			return err
		}
		var it disk.BlockGroupItem
		if !found {
			return disk.Corruptf("no block group item %v", key)
		}
		if err := it.Decode(data); err != nil {
			return &disk.CorruptError{Tree: t.fs.bgTree, Key: &key, What: "block group item", Err: err}
		}
		if it.Used == g.Used {
			continue
		}
		used := g.Used
		err = bt.UpdateItem(t.tx, key, func(b []byte) error {
			it.Used = used
			it.Encode(b)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// settleRoots writes the current root of every opened tree (but the root
// and chunk trees, which the superblock records) into its ROOT_ITEM, with
// bytes_used: nodesize × the blocks the tree reaches (as the kernel keeps
// it), from the value the transaction found plus the blocks the tree
// gained less those it lost (ctree.Tree.NetBlocks). A subvolume whose
// tree the changes of this transaction wrote gets ctransid = this
// transaction and ctime = the time SetRootTime gave, as the kernel stamps
// a subvolume at every change of one of its inodes: what `btrfs send`,
// receive and backup tools read as "changed since". Not a subvolume made
// in this transaction (otransid): a snapshot keeps its source's, a new
// subvolume has its own already. Without SetRootTime (a shrink's
// relocation, which moves blocks but changes no inode) neither moves. The
// extent tree's item is always rewritten, which copies the root tree's
// root: the superblock generation must be the root tree root's.
func (t *Txn) settleRoots() error {
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	if _, err := t.Tree(disk.ExtentTreeObjectID); err != nil {
		return err
	}
	ns := int64(t.fs.sb.NodeSize)
	for _, id := range sortedIDs(t.rootKeys) {
		tr := t.trees[id]
		r := tr.Root()
		// bytes_used: nodesize × the blocks the tree reaches, kept by
		// adding what it gained and lost; never below one node, since
		// images written before this was kept hold too small values.
		used := t.usedBase[id] + tr.NetBlocks()*ns
		if used < ns {
			used = ns
		}
		err := rt.UpdateItem(t.tx, t.rootKeys[id], func(b []byte) error {
			var ri disk.RootItem
			if err := ri.Decode(b); err != nil {
				return err
			}
			ri.Bytenr, ri.Level, ri.Generation = r.Addr, uint8(r.Level), r.Generation
			ri.BytesUsed = uint64(used)
			if !ri.Legacy {
				ri.GenerationV2 = r.Generation
				if t.rootTime != nil && isSubvolTree(id) && r.Generation == t.gen && ri.OTransID < t.gen {
					ri.CTransID, ri.CTime = t.gen, *t.rootTime
				}
			}
			if ri.Size() != len(b) {
				return disk.Corruptf("root item of tree %s: %d bytes", id.TreeName(), len(b))
			}
			ri.Encode(b)
			return nil
		})
		if err != nil {
			return fmt.Errorf("tree %s: %w", id.TreeName(), err)
		}
	}
	return nil
}

// sortedIDs returns the keys of m in ascending order.
func sortedIDs(m map[disk.ObjectID]disk.Key) []disk.ObjectID {
	out := make([]disk.ObjectID, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
