package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Workloads of the ctree benchmark.
const (
	Append      = "append"      // one stream of increasing keys
	Interleaved = "interleaved" // streams appending in turn, at random
	Random      = "random"      // uniformly random keys
	Delete      = "delete"      // random deletes from a full tree
)

// Workloads lists the workload names in the order help shows them.
var Workloads = []string{Append, Interleaved, Random, Delete}

// FileExtentItemSize is the size of a regular file extent item (struct
// btrfs_file_extent_item), the item the seed's sysbench run mostly wrote.
const FileExtentItemSize = 53

// Config is one run of the ctree benchmark.
type Config struct {
	Workload    string // one of Workloads
	Ops         int    // operations measured
	Streams     int    // interleaved: number of streams (files)
	NodeSize    int    // tree block size
	ItemSize    int    // item data bytes
	CommitEvery int    // operations per transaction
	Seed        uint64 // random choices
	NoShortcut  bool   // turn the seed patch off
	Verify      bool   // ctree.Verify at every commit and at the end
}

// DefaultConfig is the seed's workload: 512 files receiving file extent
// items in 16 KiB blocks.
func DefaultConfig() Config {
	return Config{Workload: Interleaved, Ops: 1_000_000, Streams: 512, NodeSize: 16384,
		ItemSize: FileExtentItemSize, CommitEvery: 10_000, Seed: 1}
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	switch {
	case !validWorkload(c.Workload):
		return fmt.Errorf("unknown workload %q (want one of %v)", c.Workload, Workloads)
	case c.Ops <= 0:
		return fmt.Errorf("ops must be positive, got %d", c.Ops)
	case c.Streams <= 0:
		return fmt.Errorf("streams must be positive, got %d", c.Streams)
	case c.NodeSize < 4096 || c.NodeSize > 65536 || c.NodeSize&(c.NodeSize-1) != 0:
		return fmt.Errorf("node size must be a power of two from 4096 to 65536, got %d", c.NodeSize)
	case c.ItemSize < 0 || c.ItemSize > disk.MaxItemDataSize(c.NodeSize):
		return fmt.Errorf("item size must be 0..%d for node size %d, got %d",
			disk.MaxItemDataSize(c.NodeSize), c.NodeSize, c.ItemSize)
	case c.CommitEvery <= 0:
		return fmt.Errorf("commit-every must be positive, got %d", c.CommitEvery)
	}
	return nil
}

func validWorkload(w string) bool {
	for _, x := range Workloads {
		if w == x {
			return true
		}
	}
	return false
}

// Result is what one run measured. The JSON names are the benchmark's
// output format.
type Result struct {
	Workload    string `json:"workload"`
	Shortcut    bool   `json:"shortcut"`
	Ops         int    `json:"ops"`
	Streams     int    `json:"streams,omitempty"`
	NodeSize    int    `json:"nodesize"`
	ItemSize    int    `json:"item_size"`
	CommitEvery int    `json:"commit_every"`
	Seed        uint64 `json:"seed"`

	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`

	SplitLeaf             int64 `json:"split_leaf"`
	PushLeafRight         int64 `json:"push_leaf_right"`
	PushLeafRightShortcut int64 `json:"push_leaf_right_shortcut"`
	// Calls whose slot was past the leaf's end, and of these the ones
	// with no right sibling or a right sibling without room: with the
	// shortcut on, at_end = shortcut + at_end_no_sibling + at_end_no_room.
	PushLeafRightAtEnd          int64 `json:"push_leaf_right_at_end"`
	PushLeafRightAtEndNoSibling int64 `json:"push_leaf_right_at_end_no_sibling"`
	PushLeafRightAtEndNoRoom    int64 `json:"push_leaf_right_at_end_no_room"`
	PushLeafLeft                int64 `json:"push_leaf_left"`
	ItemsMoved                  int64 `json:"items_moved"`
	BytesMoved                  int64 `json:"bytes_moved"`
	LeafSplits                  int64 `json:"leaf_splits"`
	DoubleSplits                int64 `json:"double_splits"`
	NodeSplits                  int64 `json:"node_splits"`
	Merges                      int64 `json:"merges"`
	BlocksCowed                 int64 `json:"blocks_cowed"`
	BlocksAllocated             int64 `json:"blocks_allocated"`
	BlocksFreed                 int64 `json:"blocks_freed"`
	Searches                    int64 `json:"searches"`

	// ShortcutShare is push_leaf_right_shortcut / push_leaf_right (0 when
	// there were no calls): the seed measured 53.5%.
	ShortcutShare float64 `json:"shortcut_share"`

	Leaves        int     `json:"leaves"`
	Nodes         int     `json:"nodes"`
	Height        int     `json:"height"`
	Items         int     `json:"items"`
	AvgLeafFill   float64 `json:"avg_leaf_fill"`
	BlocksWritten int64   `json:"blocks_written"`
}

// runner is the state of one run.
type runner struct {
	cfg   Config
	r     *rand.Rand
	store *ctree.MemStore
	stats *ctree.Stats
	gen   disk.Generation
	tx    *ctree.Trans
	tree  *ctree.Tree
	data  []byte
	since int // operations since the last commit
}

// Run runs one benchmark. The measured time covers the operations and the
// commits that write the dirty blocks out; for the delete workload the
// tree is filled first, untimed. With Verify set, a broken invariant is
// returned as an error.
func Run(cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	ru := &runner{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x6274726673)), stats: new(ctree.Stats), gen: 1}
	ru.store = ctree.NewMemStore(ctree.Params{NodeSize: cfg.NodeSize, FSID: benchFSID, ChunkTreeUUID: benchChunkUUID})
	ru.tx = ctree.NewTrans(ru.store, ru.gen, ru.stats)
	t, err := ctree.Create(ru.tx, disk.FSTreeObjectID, ctree.Options{NoPushRightShortcut: cfg.NoShortcut})
	if err != nil {
		return Result{}, err
	}
	ru.tree = t
	ru.data = make([]byte, cfg.ItemSize)
	var keys []disk.Key
	if cfg.Workload == Delete {
		if keys, err = ru.fill(); err != nil {
			return Result{}, err
		}
	}
	before := ru.stats.Snapshot()
	start := time.Now()
	if err := ru.run(keys); err != nil {
		return Result{}, err
	}
	if err := ru.commit(); err != nil {
		return Result{}, err
	}
	secs := time.Since(start).Seconds()
	return ru.result(ru.stats.Snapshot().Sub(before), secs)
}

var (
	benchFSID      = disk.UUID{0x62, 0x65, 0x6e, 0x63, 0x68, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	benchChunkUUID = disk.UUID{0x63, 0x68, 0x75, 0x6e, 0x6b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
)

// run performs the measured operations.
func (ru *runner) run(keys []disk.Key) error {
	cfg := ru.cfg
	switch cfg.Workload {
	case Append:
		for i := 0; i < cfg.Ops; i++ {
			k := disk.Key{ObjectID: disk.FirstFreeObjectID, Type: disk.ExtentDataKey, Offset: uint64(i) * 4096}
			if err := ru.insert(k); err != nil {
				return err
			}
		}
	case Interleaved:
		// Stream s is file 256+s; its extents are 8 KiB apart, like
		// sysbench's 8 KiB blocks written sequentially.
		next := make([]uint64, cfg.Streams)
		for i := 0; i < cfg.Ops; i++ {
			s := ru.r.IntN(cfg.Streams)
			k := disk.Key{ObjectID: disk.FirstFreeObjectID + disk.ObjectID(s), Type: disk.ExtentDataKey, Offset: next[s] * 8192}
			next[s]++
			if err := ru.insert(k); err != nil {
				return err
			}
		}
	case Random:
		for i := 0; i < cfg.Ops; i++ {
			if err := ru.insert(ru.randomKey()); err != nil && !errors.Is(err, ctree.ErrExist) {
				return err
			}
		}
	case Delete:
		for _, k := range keys {
			found, err := ru.tree.DeleteItem(ru.tx, k)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("delete %v: not found", k)
			}
			if err := ru.tick(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (ru *runner) randomKey() disk.Key {
	return disk.Key{ObjectID: disk.FirstFreeObjectID + disk.ObjectID(ru.r.Uint64N(1<<40)),
		Type: disk.ExtentDataKey, Offset: ru.r.Uint64()}
}

// insert adds one item, its payload stamped with the key, and counts an
// operation.
func (ru *runner) insert(k disk.Key) error {
	if len(ru.data) >= 8 {
		binary.LittleEndian.PutUint64(ru.data, k.Offset)
	}
	if err := ru.tree.InsertItem(ru.tx, k, ru.data); err != nil {
		return fmt.Errorf("insert %v: %w", k, err)
	}
	return ru.tick()
}

// tick counts an operation and commits every CommitEvery of them.
func (ru *runner) tick() error {
	ru.since++
	if ru.since < ru.cfg.CommitEvery {
		return nil
	}
	return ru.commit()
}

// commit writes the dirty blocks out and starts the next transaction.
func (ru *runner) commit() error {
	ru.since = 0
	if ru.cfg.Verify {
		if err := ru.tree.Verify(ru.tx); err != nil {
			return fmt.Errorf("verify at generation %d: %w", ru.gen, err)
		}
	}
	if _, err := ru.tx.WriteDirty(); err != nil {
		return err
	}
	ru.store.Commit(ru.gen)
	ru.gen++
	ru.tx = ctree.NewTrans(ru.store, ru.gen, ru.stats)
	return nil
}

// fill builds the full tree the delete workload deletes from: Ops random
// keys, inserted in random order and committed. It returns the keys in the
// order they will be deleted.
func (ru *runner) fill() ([]disk.Key, error) {
	keys := make([]disk.Key, 0, ru.cfg.Ops)
	seen := make(map[disk.Key]bool, ru.cfg.Ops)
	for len(keys) < ru.cfg.Ops {
		k := ru.randomKey()
		if seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		if err := ru.tree.InsertItem(ru.tx, k, ru.data); err != nil {
			return nil, fmt.Errorf("fill: insert %v: %w", k, err)
		}
		if len(keys)%ru.cfg.CommitEvery == 0 {
			if err := ru.commit(); err != nil {
				return nil, err
			}
		}
	}
	if err := ru.commit(); err != nil {
		return nil, err
	}
	ru.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys, nil
}

// result assembles the figures of a run; it verifies the final tree when
// asked and measures its shape.
func (ru *runner) result(d ctree.StatsSnapshot, secs float64) (Result, error) {
	cfg := ru.cfg
	info, err := ru.tree.Info(ru.tx)
	if err != nil {
		if cfg.Verify {
			return Result{}, fmt.Errorf("verify at the end: %w", err)
		}
		return Result{}, err
	}
	res := Result{Workload: cfg.Workload, Shortcut: !cfg.NoShortcut, Ops: cfg.Ops, NodeSize: cfg.NodeSize,
		ItemSize: cfg.ItemSize, CommitEvery: cfg.CommitEvery, Seed: cfg.Seed, Seconds: secs,
		SplitLeaf: d.SplitLeaf, PushLeafRight: d.PushLeafRight, PushLeafRightShortcut: d.PushLeafRightShortcut,
		PushLeafRightAtEnd: d.PushLeafRightAtEnd, PushLeafRightAtEndNoSibling: d.PushLeafRightAtEndNoSibling,
		PushLeafRightAtEndNoRoom: d.PushLeafRightAtEndNoRoom,
		PushLeafLeft:             d.PushLeafLeft, ItemsMoved: d.ItemsMoved, BytesMoved: d.BytesMoved,
		LeafSplits: d.LeafSplits, DoubleSplits: d.DoubleSplits, NodeSplits: d.NodeSplits, Merges: d.Merges,
		BlocksCowed: d.BlocksCowed, BlocksAllocated: d.BlocksAllocated, BlocksFreed: d.BlocksFreed,
		Searches: d.Searches, Leaves: info.Leaves, Nodes: info.Nodes, Height: info.Height, Items: info.Items,
		AvgLeafFill: info.AvgLeafFill, BlocksWritten: d.BlocksWritten}
	if cfg.Workload == Interleaved {
		res.Streams = cfg.Streams
	}
	if secs > 0 {
		res.OpsPerSec = float64(cfg.Ops) / secs
	}
	if d.PushLeafRight > 0 {
		res.ShortcutShare = float64(d.PushLeafRightShortcut) / float64(d.PushLeafRight)
	}
	return res, nil
}

// Compare runs cfg with the shortcut on and then off, on the same seed.
func Compare(cfg Config) (on, off Result, err error) {
	cfg.NoShortcut = false
	if on, err = Run(cfg); err != nil {
		return on, off, err
	}
	cfg.NoShortcut = true
	off, err = Run(cfg)
	return on, off, err
}
