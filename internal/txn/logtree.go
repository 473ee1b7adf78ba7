package txn

import (
	"fmt"
	"slices"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Log trees (docs/design/0016-log-tree-replay.md). A filesystem the
// kernel left with a log (an fsync after the last commit) opens here
// with the log's blocks, and the data extents only the log references,
// kept out of the allocator's reach: the extent tree does not know them,
// so without this a transaction could write over what the log says. The
// filesystem layer replays the log in the first transaction and calls
// LogReplayed; that commit drops the log from the superblock (newSuper
// always writes log_root 0), and the log's blocks become free once it is
// durable. A crash before then leaves the old superblock, log and all.

// LogTree is the log tree of one subvolume: the items an fsync logged
// for the subvolume's tree.
type LogTree struct {
	Subvol disk.ObjectID
	Root   ctree.Root
}

// logState is the log found at open.
type logState struct {
	trees []LogTree
	// blocks are the tree blocks of the log root tree and log trees;
	// extents the data extents their file extent items reference
	// (address to length).
	blocks  []disk.LogicalAddr
	extents map[disk.LogicalAddr]uint64
	// data are the data extents only the log references: taken out of
	// the free space at open, handed to the replaying transaction by
	// ClaimLoggedData.
	data []alloc.Range
	// claimed is set once a transaction took data.
	claimed bool
	// replayedBy is the generation of the transaction that replayed
	// the log (0: none yet).
	replayedBy disk.Generation
}

// loadLog reads and verifies the log root tree and every log tree,
// pins their blocks and takes the data extents only they reference.
func (fs *FS) loadLog() error {
	sb := &fs.sb
	st := &logState{}
	var blocks []disk.LogicalAddr
	logRoot := ctree.Root{Addr: sb.LogRoot, Level: int(sb.LogRootLevel), Owner: disk.TreeLogObjectID}
	var derr error
	err := fs.walkLog(logRoot, &blocks, func(k disk.Key, data []byte) {
		if derr != nil {
			return
		}
		if k.ObjectID != disk.TreeLogObjectID || k.Type != disk.RootItemKey {
			derr = fmt.Errorf("%w: log root tree item %v", ErrUnsupported, k)
			return
		}
		var ri disk.RootItem
		if err := ri.Decode(data); err != nil {
			derr = &disk.CorruptError{Tree: disk.TreeLogObjectID, Key: &k, What: "log root item", Err: err}
			return
		}
		st.trees = append(st.trees, LogTree{Subvol: disk.ObjectID(k.Offset),
			Root: ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: disk.TreeLogObjectID}})
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("log root tree: %w", err)
	}
	extents := map[disk.LogicalAddr]uint64{}
	for _, lt := range st.trees {
		err := fs.walkLog(lt.Root, &blocks, func(k disk.Key, data []byte) {
			if derr != nil || k.Type != disk.ExtentDataKey {
				return
			}
			var fe disk.FileExtentItem
			if err := fe.Decode(data); err != nil {
				derr = &disk.CorruptError{Tree: disk.TreeLogObjectID, Key: &k, What: "logged file extent", Err: err}
				return
			}
			if fe.Generation > sb.Generation+1 {
				// The kernel's tree-checker refuses it too; btrfs
				// check would find the extent's generation invalid.
				derr = &disk.CorruptError{Tree: disk.TreeLogObjectID, Key: &k,
					What: fmt.Sprintf("logged file extent generation %d beyond superblock generation %d", fe.Generation, sb.Generation)}
				return
			}
			if fe.Type == disk.FileExtentInline || fe.DiskBytenr == 0 {
				return
			}
			if n, ok := extents[fe.DiskBytenr]; ok && n != fe.DiskNumBytes {
				derr = &disk.CorruptError{Tree: disk.TreeLogObjectID, Key: &k,
					What: fmt.Sprintf("logged data extent %d is %d and %d bytes long", fe.DiskBytenr, n, fe.DiskNumBytes)}
				return
			}
			extents[fe.DiskBytenr] = fe.DiskNumBytes
		})
		if err == nil {
			err = derr
		}
		if err != nil {
			return fmt.Errorf("log tree of subvolume %d: %w", lt.Subvol, err)
		}
	}
	slices.Sort(blocks)
	st.blocks = slices.Compact(blocks)
	st.extents = extents
	fs.log = st
	return fs.holdLog()
}

// holdLog takes the log's blocks and data extents out of the free space
// (loadLog, and again whenever an aborted transaction makes loadSpace
// rebuild the free-space model from the extent tree, which knows
// neither).
func (fs *FS) holdLog() error {
	st := fs.log
	sb := &fs.sb
	for _, a := range st.blocks {
		if err := fs.space.PinFree(uint64(a), uint64(sb.NodeSize)); err != nil {
			return &disk.CorruptError{Logical: a, Tree: disk.TreeLogObjectID, What: "log tree block is not free in the extent tree", Err: err}
		}
	}
	addrs := make([]disk.LogicalAddr, 0, len(st.extents))
	for a := range st.extents {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	st.data, st.claimed = nil, false
	for _, a := range addrs {
		n := st.extents[a]
		if a%disk.LogicalAddr(sb.SectorSize) != 0 || n == 0 || n%uint64(sb.SectorSize) != 0 {
			return &disk.CorruptError{Logical: a, Tree: disk.TreeLogObjectID, What: fmt.Sprintf("logged data extent of %d bytes not sector aligned", n)}
		}
		all, any, err := fs.space.IsFree(uint64(a), n)
		switch {
		case err != nil:
			return err
		case all:
			// Written after the last commit: only the log knows it.
			if err := fs.space.Take(uint64(a), n); err != nil {
				return err
			}
			st.data = append(st.data, alloc.Range{Start: uint64(a), End: uint64(a) + n})
		case any:
			return &disk.CorruptError{Logical: a, Tree: disk.TreeLogObjectID,
				What: fmt.Sprintf("logged data extent of %d bytes is partly allocated", n)}
		}
	}
	return nil
}

// walkLog reads every block of the tree at root, verified, appending
// their addresses to blocks and handing every leaf item to item.
func (fs *FS) walkLog(root ctree.Root, blocks *[]disk.LogicalAddr, item func(disk.Key, []byte)) error {
	if root.Level < 0 || root.Level >= disk.MaxLevel {
		return &disk.CorruptError{Logical: root.Addr, Tree: root.Owner, What: fmt.Sprintf("root level %d", root.Level)}
	}
	sb := &fs.sb
	params := disk.ItemCheckParams{SectorSize: sb.SectorSize, NodeSize: sb.NodeSize, CsumType: sb.CsumType,
		SuperGen: sb.Generation, Tree: disk.TreeLogObjectID}
	return ctree.Walk(fs, root, func(n disk.Node, _ int) error {
		*blocks = append(*blocks, n.Bytenr())
		if n.IsLeaf() {
			// The items are checked as the kernel's tree-checker
			// checks a log leaf: the replay copies them into the
			// subvolume trees.
			if err := disk.CheckLeafItems(n, params); err != nil {
				return &disk.CorruptError{Logical: n.Bytenr(), Tree: disk.TreeLogObjectID, What: "log tree leaf", Err: err}
			}
			for i := 0; i < n.NumItems(); i++ {
				item(n.Key(i), n.ItemData(i))
			}
		}
		return nil
	})
}

// LogTrees returns the log trees of the filesystem, in subvolume order,
// until a transaction that replayed them commits; nil when there is no
// log.
func (fs *FS) LogTrees() []LogTree {
	if fs.log == nil || fs.sb.LogRoot == 0 {
		return nil
	}
	return slices.Clone(fs.log.trees)
}

// ClaimLoggedData hands the data extents only the log references to this
// transaction as if AllocData had reserved them: AddDataRef of a logged
// extent then creates its EXTENT_ITEM, and whatever the replay does not
// reference is given back at Commit. Call it once, before the replay
// allocates anything.
func (t *Txn) ClaimLoggedData() error {
	st := t.fs.log
	if st == nil || st.claimed {
		return nil
	}
	d := &t.data
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return t.errDataClosed()
	}
	t.mu.Lock()
	for _, r := range st.data {
		t.touch(r.Start)
	}
	t.mu.Unlock()
	for _, r := range st.data {
		d.owned.Insert(r.Start, r.End)
		d.reserved.Insert(r.Start, r.End)
	}
	st.claimed = true
	return nil
}

// LogReplayed says this transaction replayed the log: its commit may
// drop the log from the superblock. A commit of a filesystem with a log
// not replayed is refused (the fsync'd changes would be lost).
func (t *Txn) LogReplayed() {
	if t.fs.log != nil {
		t.fs.log.replayedBy = t.gen
	}
}

// checkLogDropped refuses a commit that would drop a log not replayed.
func (t *Txn) checkLogDropped() error {
	if st := t.fs.log; st != nil && t.fs.sb.LogRoot != 0 && st.replayedBy != t.gen {
		return fmt.Errorf("txn: the log tree is not replayed; this commit would drop it")
	}
	return nil
}

// LoggedOnly reports whether the data extent at bytenr is one only the
// log references (written after the last commit).
func (t *Txn) LoggedOnly(bytenr disk.LogicalAddr) bool {
	st := t.fs.log
	if st == nil {
		return false
	}
	for _, r := range st.data {
		if r.Start == uint64(bytenr) {
			return true
		}
	}
	return false
}
