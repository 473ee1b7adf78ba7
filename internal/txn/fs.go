package txn

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrUnsupported is returned for filesystems or changes this package
// cannot (yet) keep consistent; the wrapping error names the feature. It
// matches the standard library's errors.ErrUnsupported too. Its message
// names no layer: it reaches users as btrfs.ErrUnsupported.
var ErrUnsupported error = unsupportedError{}

type unsupportedError struct{}

func (unsupportedError) Error() string        { return "not supported" }
func (unsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

// ErrBusy is returned by Begin while another transaction runs.
var ErrBusy = errors.New("txn: a transaction is already running")

// FS is a btrfs filesystem opened for writing. It is not safe for
// concurrent use (one goroutine begins and commits transactions; the trees
// of a running Txn may be used concurrently, as ctree allows).
type FS struct {
	set    *blockdev.Set
	sb     disk.Superblock // last committed superblock
	chunks *chunk.Map
	rd     *chunk.Reader
	wr     *chunk.Writer
	space  *alloc.Space
	hasFST bool
	// v1 is what the first commit removes to convert a v1 space cache
	// filesystem to the free-space tree (spacecache_v1.go); nil when
	// there is nothing to convert.
	v1 *spaceCacheV1
	// bgTree is the tree holding the BLOCK_GROUP_ITEMs: the block-group
	// tree (11) with compat_ro BLOCK_GROUP_TREE, else the extent tree.
	bgTree disk.ObjectID
	// chunkTreeUUID is stamped in every block header, read from the chunk root.
	chunkTreeUUID disk.UUID
	// dead are the subvolumes deleted (ROOT_ITEM refs 0) whose trees the
	// kernel's cleaner has not finished dropping at open: DeadTrees.
	dead []disk.ObjectID
	// running is the transaction in progress, nil between transactions.
	running *Txn
	// broken is set when a commit failed half way: the on-disk state is
	// still the old commit, but memory no longer matches it.
	broken error
	// counters are what measurements read (stats.go).
	counters counters
	// flightMu protects flight, durable and broken's setting by Finish.
	flightMu sync.Mutex
	// flight is the newest prepared commit not yet known durable.
	flight *Flight
	// durable are the freed-byte sets of finished commits, for
	// ReleaseDurable.
	durable []alloc.Extents
	// finishMu serialises the superblock writes of Finish.
	finishMu sync.Mutex
	// logMu serialises the writes of log syncs (LogFlight.Finish) and
	// protects logBuf, their runBuf.
	logMu  sync.Mutex
	logBuf []byte
	// runBuf gathers consecutive tree blocks for one write (writeBlocks,
	// run by Prepare alone).
	runBuf []byte
	// finishBuf is runBuf for the writes of Flight.Finish (under finishMu).
	finishBuf []byte
	// stageBufs are write-behind staging buffers that ended transactions
	// gave back (writebehind.go).
	stageBufs sync.Pool
	// cache, when set, serves committed tree blocks and is given every
	// block a commit writes (SetBlockCache).
	cache BlockCache
	// log is the log tree found at open (logtree.go), nil without one.
	log *logState
	// markQuota is set while the qgroup status item still has to be
	// marked inconsistent by a commit (kinds.go).
	markQuota bool
}

// BlockCache is a cache of verified committed tree blocks that the layer
// above lends the write side, so that a transaction does not read and
// verify again, from the device, the blocks the last commit wrote or the
// read side already holds. Blocks it returns are never changed by their
// users (ctree copies a block before it changes it).
type BlockCache interface {
	// ReadBlock returns the block at addr, reading and verifying it
	// completely on a miss, and checking e against it on a hit.
	ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error)
	// Put offers a block this FS is writing (checksummed, final) at
	// addr, replacing whatever was cached there: an address freed by an
	// older commit may hold a new block now. The block is pinned: it is
	// served from memory, never dropped, until Unpin, because the device
	// may not hold it yet.
	Put(addr disk.LogicalAddr, n disk.Node)
	// Unpin lets the cache drop the blocks at addrs: the devices hold
	// them.
	Unpin(addrs []disk.LogicalAddr)
	// Drop forgets the blocks at addrs: a transaction that put them
	// aborted, and its generation will be used again for other blocks
	// at the same addresses, which a generation check cannot tell apart.
	Drop(addrs []disk.LogicalAddr)
}

// SetBlockCache makes c the source of committed tree blocks. Call it
// before the first transaction begins.
func (fs *FS) SetBlockCache(c BlockCache) { fs.cache = c }

// Open opens the devices of one filesystem read-write and loads what a
// transaction needs: the chunk map (superblock system chunks, then the
// chunk tree) and the block groups of the free-space model. It reads and
// verifies every block of the chunk tree and of the root tree, and refuses
// damage there with an error wrapping disk.ErrCorrupt that names the tree
// and block. Every other tree block is verified when a transaction first
// reads it, and the free space of a block group is loaded from the extent
// tree when an allocation or a free first needs it: the cost of an open
// does not grow with the filesystem. A transaction that meets damage
// fails with disk.ErrCorrupt and is aborted: nothing is written.
func Open(paths []string) (*FS, error) {
	return OpenWith(paths, blockdev.ScanOptions{})
}

// OpenWith is Open with scan options; Writable is always set. Tests pass
// opts.Open to put fault-injecting or in-memory devices underneath.
func OpenWith(paths []string, opts blockdev.ScanOptions) (*FS, error) {
	opts.Writable = true
	set, err := blockdev.ScanWith(paths, opts)
	if err != nil {
		return nil, err
	}
	fs, err := openSet(set)
	if err != nil {
		set.Close()
		return nil, err
	}
	return fs, nil
}

// openSet bootstraps an FS from a scanned device set.
func openSet(set *blockdev.Set) (*FS, error) {
	sb := *set.Super
	if err := supported(&sb); err != nil {
		return nil, err
	}
	if err := refuseSuper(&sb); err != nil {
		return nil, err
	}
	m, err := chunk.NewMapFromSuper(&sb)
	if err != nil {
		return nil, err
	}
	if err := set.CheckComplete(m.DevIDs()); err != nil {
		return nil, err
	}
	fs := &FS{set: set, sb: sb, chunks: m, hasFST: sb.CompatROFlags&disk.CompatROFreeSpaceTree != 0,
		bgTree: blockGroupTree(&sb)}
	fs.counters.init()
	// Every write to the devices (tree blocks, data, superblocks) is
	// counted for BytesWritten, data shared with host files for
	// BytesShared.
	for _, mem := range set.Members {
		mem.Device = blockdev.NewCountedShared(mem.Device, &fs.counters.written, &fs.counters.shares)
	}
	devs := set.Devices()
	fs.rd, fs.wr = chunk.NewReader(m, devs), chunk.NewWriter(m, devs)
	cr, err := fs.ReadBlock(sb.ChunkRoot, disk.Expect{Bytenr: sb.ChunkRoot, Level: int(sb.ChunkRootLevel),
		Generation: sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID})
	if err != nil {
		return nil, fmt.Errorf("chunk root: %w", err)
	}
	fs.chunkTreeUUID = cr.Header().ChunkTreeUUID
	if err := ctree.LoadChunkTree(fs, fs.chunkRoot(), m); err != nil {
		return nil, fmt.Errorf("chunk tree: %w", err)
	}
	if err := fs.refuseSprout(); err != nil {
		return nil, err
	}
	if err := set.CheckComplete(m.DevIDs()); err != nil {
		return nil, fmt.Errorf("chunk tree: %w", err)
	}
	if missing := set.Missing(m.DevIDs()); len(missing) > 0 {
		return nil, fmt.Errorf("%w: devices %v missing (no degraded writes): name every device of the filesystem"+
			" (Options.Devices, -d), or replace the missing ones with the kernel (mount -o degraded, btrfs replace)", ErrUnsupported, missing)
	}
	// The chunk and root trees are verified whole first, so damage there
	// is reported naming the tree and block before anything reads them
	// for other reasons.
	if err := fs.verifyOpenTrees(); err != nil {
		return nil, err
	}
	if err := fs.findDeadTrees(); err != nil {
		return nil, err
	}
	if err := fs.loadQuota(); err != nil {
		return nil, err
	}
	if needsV1Conversion(&sb) {
		if fs.v1, err = fs.prepareV1Conversion(); err != nil {
			return nil, err
		}
	}
	if err := fs.loadSpace(); err != nil {
		return nil, err
	}
	if sb.LogRoot != 0 {
		if err := fs.loadLog(); err != nil {
			return nil, err
		}
	}
	return fs, nil
}

// supported refuses features whose bookkeeping this package does not do.
func supported(sb *disk.Superblock) error {
	switch {
	case sb.IncompatFlags&disk.IncompatExtentTreeV2 != 0:
		return fmt.Errorf("%w: extent tree v2", ErrUnsupported)
	case sb.CompatROFlags&disk.CompatROFreeSpaceTree != 0 && sb.CompatROFlags&disk.CompatROFreeSpaceTreeValid == 0:
		return fmt.Errorf("%w: free space tree not valid", ErrUnsupported)
	}
	return nil
}

// blockGroupTree is the tree that holds sb's filesystem's
// BLOCK_GROUP_ITEMs.
func blockGroupTree(sb *disk.Superblock) disk.ObjectID {
	if sb.CompatROFlags&disk.CompatROBlockGroupTree != 0 {
		return disk.BlockGroupTreeObjectID
	}
	return disk.ExtentTreeObjectID
}

// loadSpace (re)builds the free-space model from the committed block
// group items; the free space of a group is loaded from the committed
// extent tree when first needed (alloc.LoadLazy).
func (fs *FS) loadSpace() error {
	extent, err := fs.committedRoot(disk.ExtentTreeObjectID)
	if err != nil {
		return err
	}
	groups := extent
	if fs.bgTree != disk.ExtentTreeObjectID {
		if groups, err = fs.committedRoot(fs.bgTree); err != nil {
			return err
		}
	}
	// The free space of each group is read from the extent tree of the
	// last commit when something first allocates in or frees from it.
	current := func() (ctree.Root, error) { return fs.committedRoot(disk.ExtentTreeObjectID) }
	sp, err := alloc.LoadLazy(fs, groups, extent, current, fs.chunks, fs.sb.NodeSize, fs.sb.SectorSize)
	if err != nil {
		if fs.bgTree != disk.ExtentTreeObjectID {
			return fmt.Errorf("block group tree and extent tree: %w", err)
		}
		return fmt.Errorf("extent tree: %w", err)
	}
	fs.space = sp
	if fs.log != nil && fs.sb.LogRoot != 0 {
		// A rebuild after an abort: the log is still to be replayed.
		return fs.holdLog()
	}
	return nil
}

// committedRoot is where the committed tree id starts, from its ROOT_ITEM.
func (fs *FS) committedRoot(id disk.ObjectID) (ctree.Root, error) {
	ri, _, err := fs.rootItem(id)
	if err != nil {
		return ctree.Root{}, fmt.Errorf("tree %s: %w", id.TreeName(), err)
	}
	return ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: id}, nil
}

// rootTreeRoot is where the committed root tree starts.
func (fs *FS) rootTreeRoot() ctree.Root {
	return ctree.Root{Addr: fs.sb.Root, Level: int(fs.sb.RootLevel), Generation: fs.sb.Generation, Owner: disk.RootTreeObjectID}
}

// chunkRoot is where the committed chunk tree starts.
func (fs *FS) chunkRoot() ctree.Root {
	return ctree.Root{Addr: fs.sb.ChunkRoot, Level: int(fs.sb.ChunkRootLevel),
		Generation: fs.sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID}
}

// rootItem finds the committed ROOT_ITEM of tree id: the item with the
// smallest offset among (id, ROOT_ITEM, *).
func (fs *FS) rootItem(id disk.ObjectID) (*disk.RootItem, disk.Key, error) {
	c := ctree.NewCursor(fs, fs.rootTreeRoot())
	ok, err := c.Seek(disk.Key{ObjectID: id, Type: disk.RootItemKey})
	if err != nil {
		return nil, disk.Key{}, err
	}
	if !ok || c.Key().ObjectID != id || c.Key().Type != disk.RootItemKey {
		return nil, disk.Key{}, fmt.Errorf("no ROOT_ITEM for tree %s", id.TreeName())
	}
	var ri disk.RootItem
	if err := ri.Decode(c.Data()); err != nil {
		k := c.Key()
		return nil, disk.Key{}, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k, What: "root item", Err: err}
	}
	return &ri, c.Key(), nil
}

// blockParams are what committed blocks are checked against.
func (fs *FS) blockParams() disk.BlockParams {
	return disk.BlockParams{NodeSize: int(fs.sb.NodeSize), CsumType: fs.sb.CsumType,
		FSID: fs.sb.MetadataFSID(), SuperGen: fs.sb.Generation}
}

// ReadBlock implements ctree.Reader over the committed filesystem: the
// block is read from any good copy and checked completely.
func (fs *FS) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	if fs.cache != nil {
		return fs.cache.ReadBlock(addr, e)
	}
	p := fs.blockParams()
	buf := make([]byte, p.NodeSize)
	if err := fs.rd.ReadBlock(buf, addr, p.CsumType.VerifyBlock); err != nil {
		return nil, err
	}
	n := disk.Node(buf)
	if err := n.Check(p, e); err != nil {
		return nil, err
	}
	return n, nil
}

// Generation returns the generation of the last commit.
func (fs *FS) Generation() disk.Generation { return fs.sb.Generation }

// Super returns a copy of the last committed superblock.
func (fs *FS) Super() disk.Superblock { return fs.sb }

// Space returns the free-space model (read only; for tests and tools).
func (fs *FS) Space() *alloc.Space { return fs.space }

// Close closes the devices. A running transaction is aborted; prepared
// commits are finished first.
func (fs *FS) Close() error {
	if fs.running != nil {
		fs.running.Abort()
	}
	err := fs.WaitFlights()
	if cerr := fs.set.Close(); err == nil {
		err = cerr
	}
	return err
}

// Set returns the devices the FS writes to. The filesystem layer reads
// through the same devices (so a cache under them sees every write); it
// must not close them: Close does.
func (fs *FS) Set() *blockdev.Set { return fs.set }

// Chunks returns the chunk map transactions keep current (chunks a running
// transaction adds appear in it at once; nothing committed points there
// until the transaction commits). chunk.Map is safe for concurrent use.
func (fs *FS) Chunks() *chunk.Map { return fs.chunks }
