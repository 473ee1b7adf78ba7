package txn

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// blockInfo is what the extent tree must record about a tree block.
type blockInfo struct {
	owner disk.ObjectID
	level int
}

// Txn is one running transaction. It implements ctree.Store for the
// engine: blocks stay in memory until Commit. Trees are opened with Tree
// and changed through Trans.
type Txn struct {
	fs  *FS
	gen disk.Generation
	tx  *ctree.Trans
	wb  writeBehind // small data writes held back (writebehind.go)

	dataBytes atomic.Uint64 // file data bytes handed to WriteData

	// treesMu protects trees and rootKeys where changes running in
	// parallel open trees (Tree, OpenedTrees); the commit and the
	// changes that run alone use the maps without it. Lock order:
	// treesMu, then block locks and mu.
	treesMu  sync.Mutex
	trees    map[disk.ObjectID]*ctree.Tree
	rootKeys map[disk.ObjectID]disk.Key // ROOT_ITEM key of every opened tree but root and chunk
	// lastSnap is the last_snapshot of every opened tree whose
	// ROOT_ITEM sets it: blocks of the tree no newer may be shared
	// (CopyShared).
	lastSnap map[disk.ObjectID]disk.Generation
	// usedBase is, for every tree in rootKeys, what its ROOT_ITEM
	// bytes_used would be had the Tree gained and lost no block in this
	// transaction: settleRoots writes usedBase + NetBlocks × nodesize.
	usedBase map[disk.ObjectID]int64
	// rootTime, once SetRootTime has set it, is the ctime settleRoots
	// gives the subvolumes this transaction changed (with ctransid).
	rootTime *disk.Timespec

	// csumMu makes each change of the csum tree by AddCsums whole, and
	// keeps it still for a reader of this transaction's csums
	// (LockCsums): changes to different files run in parallel, and
	// their checksum runs are often neighbours in one item.
	csumMu sync.Mutex

	// mu protects the maps and counters below: the engine calls the
	// Store methods from every goroutine that works on a tree.
	mu      sync.Mutex
	pending map[disk.LogicalAddr][]byte // blocks handed to Write, checksummed, not yet on disk
	// sealed are the addresses of pending in order, once Prepare has
	// handed them to the block cache for the flight to write.
	sealed []disk.LogicalAddr

	// Extent bookkeeping for Commit. live: allocated in this transaction
	// and not freed; recorded: those whose METADATA_ITEM is in the extent
	// tree; gone: blocks whose METADATA_ITEM must be deleted (committed
	// blocks freed, or recorded blocks freed again).
	live     map[disk.LogicalAddr]blockInfo
	recorded map[disk.LogicalAddr]bool
	gone     map[disk.LogicalAddr]bool
	// treeRefs are the pending reference changes of committed tree
	// blocks (treerefs.go), applied by the commit; nil until the first.
	treeRefs map[disk.LogicalAddr]*treeRefDelta
	touched  map[uint64]bool // start of every block group alloc or free changed
	changes  int             // count of Alloc and Free calls, for the fixpoint
	err      error           // first error of Alloc/Free, reported by Commit
	done     bool
	// dropped is set by Abort before it lets go of anything the
	// transaction wrote or staged (Dropped).
	dropped atomic.Bool

	// growMu protects grow: the chunks this transaction allocated and the
	// device space it took (chunkalloc.go); nil until the first new chunk.
	growMu sync.Mutex
	grow   *growth

	// data is the data-extent bookkeeping (data.go): reservations and the
	// reference changes Commit applies to the extent tree.
	data dataState

	// incompat holds superblock incompat bits Commit adds (SetIncompat);
	// protected by mu.
	incompat uint64
	// log is the tree log of fsyncs since Begin (treelog.go), nil until
	// the first; used under the caller's lock, one fsync at a time.
	log *treeLog
	// label, if set, is the superblock label Commit writes (SetLabel);
	// protected by mu.
	label *[disk.LabelSize]byte
	// quotaMarked is set once this transaction has marked the qgroup
	// counts inconsistent (kinds.go).
	quotaMarked bool
	// fstCreated is set once this transaction has begun converting a v1
	// space cache filesystem to the free-space tree (spacecache_v1.go).
	fstCreated bool
	// v1Cleared is set once this transaction has removed the v1 space
	// cache of a filesystem that is not converted (spacecache_v1.go).
	v1Cleared bool
}

// Begin starts a transaction with generation super generation + 1.
func (fs *FS) Begin() (*Txn, error) {
	if err := fs.brokenErr(); err != nil {
		return nil, fmt.Errorf("txn: filesystem unusable after failed commit: %w", err)
	}
	fs.ReleaseDurable()
	if fs.running != nil {
		return nil, ErrBusy
	}
	t := &Txn{fs: fs, gen: fs.sb.Generation + 1,
		trees: map[disk.ObjectID]*ctree.Tree{}, rootKeys: map[disk.ObjectID]disk.Key{},
		usedBase: map[disk.ObjectID]int64{},
		pending:  map[disk.LogicalAddr][]byte{},
		live:     map[disk.LogicalAddr]blockInfo{}, recorded: map[disk.LogicalAddr]bool{},
		gone: map[disk.LogicalAddr]bool{}, touched: map[uint64]bool{}}
	t.tx = ctree.NewTrans(t, t.gen, nil)
	t.wb.write = t.writeData
	t.wb.pool = &fs.stageBufs
	fs.running = t
	return t, nil
}

// Generation returns the transaction id T.
func (t *Txn) Generation() disk.Generation { return t.gen }

// Trans returns the engine transaction to pass to tree operations.
func (t *Txn) Trans() *ctree.Trans { return t.tx }

// Tree opens tree id in this transaction: the root and chunk trees from
// the superblock, every other tree from its ROOT_ITEM. The same *Tree is
// returned for the same id. Tree itself is not safe for concurrent use:
// open the trees before sharing them between goroutines. Tree may be
// called from several goroutines at once: each id is opened once.
func (t *Txn) Tree(id disk.ObjectID) (*ctree.Tree, error) {
	t.treesMu.Lock()
	defer t.treesMu.Unlock()
	return t.treeLocked(id)
}

// treeLocked is Tree with treesMu held.
func (t *Txn) treeLocked(id disk.ObjectID) (*ctree.Tree, error) {
	if t.done {
		return nil, fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	if tr := t.trees[id]; tr != nil {
		return tr, nil
	}
	var (
		root ctree.Root
		used uint64 // ROOT_ITEM bytes_used
	)
	switch id {
	case disk.RootTreeObjectID:
		root = t.fs.rootTreeRoot()
	case disk.ChunkTreeObjectID:
		root = t.fs.chunkRoot()
	default:
		rt, err := t.treeLocked(disk.RootTreeObjectID)
		if err != nil {
			return nil, err
		}
		ri, key, err := t.lookupRootItem(rt, id)
		if err != nil {
			return nil, err
		}
		root = ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: id}
		t.rootKeys[id] = key
		t.setLastSnapLocked(id, ri.LastSnapshot)
		used = ri.BytesUsed
	}
	tr, err := ctree.Open(t.tx, root, t.fs.treeOptions(id))
	if err != nil {
		return nil, err
	}
	t.trees[id] = tr
	if _, ok := t.rootKeys[id]; ok {
		t.setUsedLocked(id, tr, used)
	}
	return tr, nil
}

// setUsedLocked records that tree id's ROOT_ITEM bytes_used is used now,
// with tr as it stands: the commit adds what tr gains or loses from here
// on (settleRoots). treesMu is held, or the caller runs alone.
func (t *Txn) setUsedLocked(id disk.ObjectID, tr *ctree.Tree, used uint64) {
	// A value past 2^63 (taken below zero by a kernel, after an older
	// gobtrfs left it too small) reads as negative and is clamped by
	// settleRoots.
	t.usedBase[id] = int64(used) - tr.NetBlocks()*int64(t.fs.sb.NodeSize)
}

// lookupRootItem finds the ROOT_ITEM of id in the running root tree.
func (t *Txn) lookupRootItem(rt *ctree.Tree, id disk.ObjectID) (*disk.RootItem, disk.Key, error) {
	var (
		ri    disk.RootItem
		key   disk.Key
		found bool
		derr  error
	)
	start := disk.Key{ObjectID: id, Type: disk.RootItemKey}
	end := disk.Key{ObjectID: id, Type: disk.RootItemKey, Offset: ^uint64(0)}
	err := rt.Range(t.tx, start, end, func(k disk.Key, data []byte) (bool, error) {
		key, found = k, true
		derr = ri.Decode(data)
		return false, nil
	})
	if err != nil {
		return nil, key, err
	}
	if !found {
		return nil, key, fmt.Errorf("%w: no ROOT_ITEM for tree %s", ErrNoTree, id.TreeName())
	}
	if derr != nil {
		return nil, key, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &key, What: "root item", Err: derr}
	}
	return &ri, key, nil
}

// Params implements ctree.Store.
func (t *Txn) Params() ctree.Params {
	sb := &t.fs.sb
	return ctree.Params{NodeSize: int(sb.NodeSize), FSID: sb.MetadataFSID(), ChunkTreeUUID: t.fs.chunkTreeUUID}
}

// DirtyBytes is how much the transaction has changed that its commit will
// make durable: file data handed to WriteData plus the tree blocks it
// holds dirty. The filesystem layer starts a commit when this passes its
// limit, so a long stream of writes does not grow the heap (dirty blocks,
// pending references) without bound.
func (t *Txn) DirtyBytes() uint64 {
	return t.dataBytes.Load() + uint64(t.tx.DirtyBlocks())*uint64(t.fs.sb.NodeSize)
}
