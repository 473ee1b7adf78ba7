package check

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Options configure Run. The zero value checks metadata only, on all
// cores, within DefaultMemoryLimit.
type Options struct {
	// DataCsum reads every data sector and verifies its checksum, on
	// every mirror (btrfs check --check-data-csum).
	DataCsum bool
	// MemoryLimit is the memory the check may keep (bytes); 0 means
	// DefaultMemoryLimit. A quarter sizes the block cache, a quarter
	// buffers the file extents' references to data extents and a quarter
	// the fs trees' names and directory indexes; they spill to temporary files past it
	// (docs/design/0024-check-memory.md). The per-tree-block and
	// per-inode state is still held in memory whatever the limit.
	MemoryLimit int64
	// Workers is the number of goroutines for parallel work; 0 means
	// GOMAXPROCS.
	Workers int
	// Log, when set, receives each phase line ("[2/8] checking root
	// items") and each problem line as they happen, as btrfs check prints
	// them.
	Log func(line string)
}

// DefaultMemoryLimit is Options.MemoryLimit's default.
const DefaultMemoryLimit = 256 << 20

// maxProblems caps the report: a wrecked image must not make the check
// allocate without bound.
const maxProblems = 10000

// ErrNoDevice is returned when Run is given no device.
var ErrNoDevice = errors.New("check: no device given")

// Run checks the filesystem on devices (image files or block devices; the
// first names the filesystem). It returns an error only when the check
// could not run; problems found are in the Report.
func Run(ctx context.Context, devices []string, opts Options) (Report, error) {
	if len(devices) == 0 {
		return Report{}, ErrNoDevice
	}
	if opts.MemoryLimit <= 0 {
		opts.MemoryLimit = DefaultMemoryLimit
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	set, err := blockdev.ScanWith(devices, blockdev.ScanOptions{})
	if err != nil {
		return Report{}, err
	}
	defer set.Close()
	c, err := newChecker(ctx, set, opts)
	if err != nil {
		return Report{}, err
	}
	defer c.dataRefs.Close()
	if err := c.run(); err != nil {
		return c.report, err
	}
	return c.report, nil
}

// checker holds one run's state. Facts gathered by one phase and used by
// later ones live here; see docs/design/0020-check.md for which are held
// in memory and how they are to be streamed.
type checker struct {
	ctx    context.Context
	opts   Options
	sb     disk.Superblock
	set    *blockdev.Set
	m      *chunk.Map
	rd     *chunk.Reader
	params disk.BlockParams
	items  disk.ItemCheckParams
	cache  *blockCache

	mu     sync.Mutex
	report Report
	seen   map[string]bool

	trees    []treeRoot
	treeByID map[disk.ObjectID][]treeRoot

	// Filled by the tree walk (phase "checking extents").
	blocks map[disk.LogicalAddr]*blockRec
	// dataRefs holds the file extents' references to data extents,
	// streamed (datarefs.go); dataJoin reads them back during the
	// extent-tree pass.
	dataRefs *sorter
	dataSeq  uint64
	dataJoin *dataJoin
	// nameRuns counts the runs the fs trees' name sorters spilled.
	nameRuns atomic.Int64
	// extents lists every extent item of the extent tree, in order.
	extents []extentRec
	bgs     []bgRec
	// logData are the data extents the log trees reference, sorted.
	logData []span
}

// treeRoot is one tree to check.
type treeRoot struct {
	id   disk.ObjectID
	key  disk.Key
	root ctree.Root
	item disk.RootItem
}

func newChecker(ctx context.Context, set *blockdev.Set, opts Options) (*checker, error) {
	sb := *set.Super
	if sb.NodeSize < 4096 || sb.NodeSize > 1<<16 || sb.NodeSize&(sb.NodeSize-1) != 0 {
		return nil, disk.Corruptf("superblock: node size %d", sb.NodeSize)
	}
	if sb.SectorSize < 4096 || sb.SectorSize > sb.NodeSize || sb.SectorSize&(sb.SectorSize-1) != 0 {
		return nil, disk.Corruptf("superblock: sector size %d", sb.SectorSize)
	}
	if !sb.CsumType.Valid() {
		return nil, disk.Corruptf("superblock: unknown checksum type %d", sb.CsumType)
	}
	m, err := chunk.NewMapFromSuper(&sb)
	if err != nil {
		return nil, err
	}
	c := &checker{
		ctx: ctx, opts: opts, sb: sb, set: set, m: m,
		rd:       chunk.NewReader(m, set.Devices()),
		params:   disk.BlockParams{NodeSize: int(sb.NodeSize), CsumType: sb.CsumType, FSID: sb.MetadataFSID(), SuperGen: sb.Generation},
		items:    disk.ItemCheckParams{SectorSize: sb.SectorSize, NodeSize: sb.NodeSize, CsumType: sb.CsumType, SuperGen: sb.Generation},
		seen:     map[string]bool{},
		blocks:   map[disk.LogicalAddr]*blockRec{},
		dataRefs: newSorter(opts.MemoryLimit/4, ""),
	}
	c.cache = newBlockCache(int(opts.MemoryLimit/4) / int(sb.NodeSize))
	c.report.UUID = sb.FSID.String()
	root := ctree.Root{Addr: sb.ChunkRoot, Level: int(sb.ChunkRootLevel), Generation: sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID}
	if err := ctree.LoadChunkTree(c, root, m); err != nil {
		return nil, &disk.CorruptError{Logical: sb.ChunkRoot, Tree: disk.ChunkTreeObjectID, What: "cannot read chunk root", Err: err}
	}
	return c, nil
}

// problem records p once (identical problems found twice are one).
func (c *checker) problem(p Problem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := fmt.Sprintf("%s|%d|%v|%d|%s", p.Kind, p.Tree, p.Key, p.Addr, p.Message)
	if c.seen[id] || len(c.report.Problems) >= maxProblems {
		return
	}
	c.seen[id] = true
	c.report.Problems = append(c.report.Problems, p)
	if c.opts.Log != nil {
		c.opts.Log(p.Message)
	}
}

func (c *checker) problemf(kind Kind, tree disk.ObjectID, addr disk.LogicalAddr, key *disk.Key, format string, args ...any) {
	c.problem(Problem{Kind: kind, Tree: uint64(tree), Addr: uint64(addr), Key: publicKey(key), Message: fmt.Sprintf(format, args...)})
}

func publicKey(k *disk.Key) *Key {
	if k == nil {
		return nil
	}
	return &Key{ObjectID: uint64(k.ObjectID), Type: uint8(k.Type), Offset: k.Offset}
}

func (c *checker) log(format string, args ...any) {
	if c.opts.Log != nil {
		c.opts.Log(fmt.Sprintf(format, args...))
	}
}

// phases is btrfs check's order and wording (btrfs-progs 6.19).
const numPhases = 8

func (c *checker) phase(i int, what string) {
	c.log("[%d/%d] %s", i, numPhases, what)
}

func (c *checker) run() error {
	if err := c.loadRoots(); err != nil {
		return err
	}
	if c.sb.LogRoot == 0 {
		c.phase(1, "checking log skipped (none written)")
	} else {
		c.phase(1, "checking log")
		c.checkLog()
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	c.phase(2, "checking root items")
	if err := c.checkRootBlocks(); err != nil {
		return err
	}
	// The fs-tree pass runs beside the extent and free space phases; its
	// problems are reported in phase 5. Whatever ends the run, it is
	// waited for: it reads the devices Run closes.
	fsRoots := c.startFSRoots()
	waited := false
	waitFSRoots := func() error {
		if waited {
			return nil
		}
		waited = true
		return fsRoots()
	}
	defer waitFSRoots()
	steps := []struct {
		n    int
		what string
		fn   func() error
	}{
		{3, "checking extents", c.checkExtents},
		{4, c.freeSpacePhaseName(), c.checkFreeSpace},
		{5, "checking fs roots", waitFSRoots},
		{6, c.csumPhaseName(), c.checkCsums},
		{7, "checking root refs", c.checkRootRefs},
	}
	for _, s := range steps {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		c.phase(s.n, s.what)
		if err := s.fn(); err != nil {
			return err
		}
	}
	if !c.hasTree(disk.QuotaTreeObjectID) {
		c.phase(8, "checking quota groups skipped (not enabled on this FS)")
	} else {
		c.phase(8, "checking quota groups")
		if err := c.checkQuota(); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) freeSpacePhaseName() string {
	if c.sb.CompatROFlags&disk.CompatROFreeSpaceTree == 0 {
		return "checking free space cache"
	}
	return "checking free space tree"
}

func (c *checker) csumPhaseName() string {
	if c.opts.DataCsum {
		return "checking csums against data"
	}
	return "checking only csums items (without verifying data)"
}

func (c *checker) hasTree(id disk.ObjectID) bool { return len(c.treeByID[id]) > 0 }

func (c *checker) tree(id disk.ObjectID) (treeRoot, bool) {
	t := c.treeByID[id]
	if len(t) == 0 {
		return treeRoot{}, false
	}
	return t[0], true
}

// forEachItem iterates the items of a tree in key order, through the
// cache. A block that cannot be read ends the iteration; the tree walk
// reports it.
func (c *checker) forEachItem(t treeRoot, fn func(k disk.Key, data []byte, leaf disk.Node) error) error {
	cur := ctree.NewCursor(c, t.root)
	ok, err := cur.First()
	for ; ok && err == nil; ok, err = cur.Next() {
		if err := fn(cur.Key(), cur.Data(), cur.Leaf()); err != nil {
			return err
		}
	}
	if err != nil && !errors.Is(err, disk.ErrCorrupt) && !errors.Is(err, errRead) {
		return err
	}
	return nil
}

// sortedTreeIDs returns the ids of c.trees in order.
func (c *checker) sortedTreeIDs() []disk.ObjectID {
	ids := make([]disk.ObjectID, 0, len(c.treeByID))
	for id := range c.treeByID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func treeName(id disk.ObjectID) string { return strings.ToLower(id.TreeName()) }
