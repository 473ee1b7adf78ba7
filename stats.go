package btrfs

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TreeCounters are what the copy-on-write B-tree engine did in one tree
// (or, summed, in all of them): the counters of the seed patch's
// measurement. Field names in JSON are those of `gobtrfs bench`.
//
// Every push_leaf_right call from split_leaf ends one way:
//
//	push_leaf_right = push_leaf_right_shortcut
//	                + push_leaf_right_not_at_end
//	                + push_leaf_right_at_end_no_sibling
//	                + push_leaf_right_at_end_no_room
//	                + push_leaf_right_at_end_shortcut_off
type TreeCounters struct {
	SplitLeaf             int64 `json:"split_leaf"`               // a leaf lacked room for an insertion or extension
	PushLeafRight         int64 `json:"push_leaf_right"`          // calls from split_leaf
	PushLeafRightShortcut int64 `json:"push_leaf_right_shortcut"` // of those, the seed patch's shortcut
	// Why the shortcut was not taken: the new key did not go past the
	// leaf's last item; it did, but the leaf was its parent's last child,
	// or the right neighbour lacked room; or it did and the neighbour had
	// room, but the shortcut was switched off (Options.NoPushRightShortcut).
	PushLeafRightNotAtEnd         int64 `json:"push_leaf_right_not_at_end"`
	PushLeafRightAtEndNoSibling   int64 `json:"push_leaf_right_at_end_no_sibling"`
	PushLeafRightAtEndNoRoom      int64 `json:"push_leaf_right_at_end_no_room"`
	PushLeafRightAtEndShortcutOff int64 `json:"push_leaf_right_at_end_shortcut_off"`

	PushLeafLeft  int64 `json:"push_leaf_left"` // calls from split_leaf
	ItemsMoved    int64 `json:"items_moved"`    // leaf items moved to a neighbour by any push
	BytesMoved    int64 `json:"bytes_moved"`    // leaf bytes (item headers and data) moved by any push
	LeafSplits    int64 `json:"leaf_splits"`    // leaves made by split_leaf
	NodeSplits    int64 `json:"node_splits"`    // internal nodes split
	BlocksCowed   int64 `json:"blocks_cowed"`   // blocks copied on write
	BlocksWritten int64 `json:"blocks_written"` // blocks written out at commits
}

// Add returns the counters of c and o summed.
func (c TreeCounters) Add(o TreeCounters) TreeCounters {
	return TreeCounters{
		SplitLeaf: c.SplitLeaf + o.SplitLeaf, PushLeafRight: c.PushLeafRight + o.PushLeafRight,
		PushLeafRightShortcut:         c.PushLeafRightShortcut + o.PushLeafRightShortcut,
		PushLeafRightNotAtEnd:         c.PushLeafRightNotAtEnd + o.PushLeafRightNotAtEnd,
		PushLeafRightAtEndNoSibling:   c.PushLeafRightAtEndNoSibling + o.PushLeafRightAtEndNoSibling,
		PushLeafRightAtEndNoRoom:      c.PushLeafRightAtEndNoRoom + o.PushLeafRightAtEndNoRoom,
		PushLeafRightAtEndShortcutOff: c.PushLeafRightAtEndShortcutOff + o.PushLeafRightAtEndShortcutOff,
		PushLeafLeft:                  c.PushLeafLeft + o.PushLeafLeft,
		ItemsMoved:                    c.ItemsMoved + o.ItemsMoved, BytesMoved: c.BytesMoved + o.BytesMoved,
		LeafSplits: c.LeafSplits + o.LeafSplits, NodeSplits: c.NodeSplits + o.NodeSplits,
		BlocksCowed: c.BlocksCowed + o.BlocksCowed, BlocksWritten: c.BlocksWritten + o.BlocksWritten,
	}
}

// ShortcutShare is the share of push_leaf_right calls that took the
// shortcut (0 without calls).
func (c TreeCounters) ShortcutShare() float64 {
	if c.PushLeafRight == 0 {
		return 0
	}
	return float64(c.PushLeafRightShortcut) / float64(c.PushLeafRight)
}

// treeCounters picks the published counters out of the engine's.
func treeCounters(s ctree.StatsSnapshot) TreeCounters {
	return TreeCounters{
		SplitLeaf: s.SplitLeaf, PushLeafRight: s.PushLeafRight, PushLeafRightShortcut: s.PushLeafRightShortcut,
		PushLeafRightNotAtEnd:         s.PushLeafRight - s.PushLeafRightAtEnd,
		PushLeafRightAtEndNoSibling:   s.PushLeafRightAtEndNoSibling,
		PushLeafRightAtEndNoRoom:      s.PushLeafRightAtEndNoRoom,
		PushLeafRightAtEndShortcutOff: s.PushLeafRightAtEnd - s.PushLeafRightShortcut - s.PushLeafRightAtEndNoSibling - s.PushLeafRightAtEndNoRoom,
		PushLeafLeft:                  s.PushLeafLeft, ItemsMoved: s.ItemsMoved, BytesMoved: s.BytesMoved,
		LeafSplits: s.LeafSplits, NodeSplits: s.NodeSplits, BlocksCowed: s.BlocksCowed, BlocksWritten: s.BlocksWritten,
	}
}

// WriteCounters are the measurements of a writable FS since it was opened.
type WriteCounters struct {
	// Commits is the number of commits that made changes durable.
	Commits int64 `json:"commits"`
	// LogSyncs is the number of File.Syncs made durable through the
	// tree log instead of a commit.
	LogSyncs int64 `json:"log_syncs"`
	// Changes is the number of changes made; ParallelChanges, of those,
	// the ones that ran beside changes to other files (writes and
	// truncates through open Files, creations, renames, ...:
	// docs/design/0009); ParallelDirRenames, of those, the renames of
	// directories.
	Changes            int64 `json:"changes"`
	ParallelChanges    int64 `json:"parallel_changes"`
	ParallelDirRenames int64 `json:"parallel_dir_renames"`
	// DeviceBytesWritten is every byte written to the devices: data,
	// tree blocks (every copy) and superblocks.
	DeviceBytesWritten int64 `json:"device_bytes_written"`
	// DeviceBytesShared is the file data stored by sharing a host file's
	// blocks (PrepareShared) instead of writing it, every copy counted;
	// DeviceBytesWritten does not include it.
	DeviceBytesShared int64 `json:"device_bytes_shared"`
	// DeviceBytesNotShared is the file data offered for sharing that the
	// host would not share (another filesystem, offsets off its block
	// boundaries), written instead and counted in DeviceBytesWritten.
	DeviceBytesNotShared int64 `json:"device_bytes_not_shared"`
	// Trees holds the engine's counters by tree name (TreeName), for
	// every tree a transaction opened.
	Trees map[string]TreeCounters `json:"trees"`
}

// Total sums the counters of every tree.
func (w WriteCounters) Total() TreeCounters {
	var t TreeCounters
	for _, c := range w.Trees {
		t = t.Add(c)
	}
	return t
}

// WriteCounters returns what the write side did since OpenWritable: its
// commits, the bytes it wrote to the devices and the B-tree engine's
// counters per tree. It may be called while changes run (each counter is
// read atomically, not all of them at one instant). A read-only FS has
// none: the error matches syscall.EROFS and fs.ErrPermission.
func (fsys *FS) WriteCounters() (WriteCounters, error) {
	if fsys.w == nil {
		return WriteCounters{}, &fs.PathError{Op: "counters", Path: ".", Err: errReadOnly}
	}
	tfs := fsys.w.tfs
	wc := WriteCounters{Commits: tfs.Commits(), LogSyncs: tfs.LogSyncs(), DeviceBytesWritten: tfs.BytesWritten(), Trees: map[string]TreeCounters{},
		Changes: int64(fsys.w.seq.Load()), ParallelChanges: fsys.w.parallel.Load(),
		ParallelDirRenames: fsys.w.parallelDirRenames.Load()}
	wc.DeviceBytesShared, wc.DeviceBytesNotShared = tfs.BytesShared()
	for id, s := range tfs.TreeStats() {
		wc.Trees[TreeName(uint64(id))] = treeCounters(s)
	}
	return wc, nil
}

// TreeName names a tree for WriteCounters: "root", "extent", "chunk",
// "dev", "fs" (the top-level subvolume, id 5), "csum", "quota", "uuid",
// "free_space", "block_group", "raid_stripe", "data_reloc"; other
// subvolumes are "subvol ID" (e.g. "subvol 256"); any other id is its
// btrfs-progs name in lower case, or its number.
func TreeName(id uint64) string {
	switch o := disk.ObjectID(id); o {
	case disk.RootTreeObjectID:
		return "root"
	case disk.ExtentTreeObjectID:
		return "extent"
	case disk.ChunkTreeObjectID:
		return "chunk"
	case disk.DevTreeObjectID:
		return "dev"
	case disk.FSTreeObjectID:
		return "fs"
	case disk.CsumTreeObjectID:
		return "csum"
	case disk.QuotaTreeObjectID:
		return "quota"
	case disk.UUIDTreeObjectID:
		return "uuid"
	case disk.FreeSpaceTreeObjectID:
		return "free_space"
	case disk.BlockGroupTreeObjectID:
		return "block_group"
	case disk.RaidStripeTreeObjectID:
		return "raid_stripe"
	case disk.DataRelocTreeObjectID:
		return "data_reloc"
	default:
		if o >= disk.FirstFreeObjectID && o <= disk.LastFreeObjectID {
			return fmt.Sprintf("subvol %d", id)
		}
		return strings.TrimSuffix(strings.ToLower(o.TreeName()), "_tree")
	}
}
