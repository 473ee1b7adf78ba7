package ctree

import "sync/atomic"

// Stats counts what the engine does. Every field is an atomic counter, so
// one Stats may be shared by all goroutines of a transaction, or by several
// transactions. Use Snapshot to read them.
type Stats struct {
	Searches       atomic.Int64 // Search calls
	SearchRestarts atomic.Int64 // descents restarted to take more write locks
	BlocksCowed    atomic.Int64 // blocks copied on write

	SplitLeaf             atomic.Int64 // split_leaf calls (a leaf lacked room for an insertion or extension)
	PushLeafRight         atomic.Int64 // push_leaf_right calls made by split_leaf to make room
	PushLeafRightShortcut atomic.Int64 // of those, calls that took the seed patch's shortcut
	// Of the push_leaf_right calls, those whose insertion slot was past the
	// leaf's last item (the shortcut's first condition), and of these the
	// ones where the leaf was its parent's last child or the right sibling
	// lacked room. With the shortcut on, at_end = shortcut + no_sibling +
	// no_room.
	PushLeafRightAtEnd          atomic.Int64
	PushLeafRightAtEndNoSibling atomic.Int64
	PushLeafRightAtEndNoRoom    atomic.Int64
	PushLeafLeft                atomic.Int64 // push_leaf_left calls made by split_leaf to make room
	PushForDoubleSplit          atomic.Int64 // push_for_double_split calls
	ItemsMoved                  atomic.Int64 // leaf items moved to a sibling by any push
	BytesMoved                  atomic.Int64 // leaf bytes (item headers plus data) moved by any push

	LeafSplits   atomic.Int64 // leaves created by split_leaf (a double split creates two)
	DoubleSplits atomic.Int64 // split_leaf calls that split twice
	NodeSplits   atomic.Int64 // nodes split (split_node after pushes failed)
	NodePushes   atomic.Int64 // node pointers pushed to a sibling instead of splitting
	Merges       atomic.Int64 // leaves and nodes emptied into siblings and freed on delete
	RootGrows    atomic.Int64 // new roots (the tree grew a level)
	RootShrinks  atomic.Int64 // root collapses (the tree lost a level)

	BlocksAllocated atomic.Int64 // new tree blocks (COW copies and new leaves, nodes, roots)
	BlocksFreed     atomic.Int64 // tree blocks handed back to the store
	BlocksWritten   atomic.Int64 // dirty blocks written out
}

// StatsSnapshot is a plain copy of Stats, with the names the benchmark's
// JSON output uses.
type StatsSnapshot struct {
	Searches                    int64 `json:"searches"`
	SearchRestarts              int64 `json:"search_restarts"`
	BlocksCowed                 int64 `json:"blocks_cowed"`
	SplitLeaf                   int64 `json:"split_leaf"`
	PushLeafRight               int64 `json:"push_leaf_right"`
	PushLeafRightShortcut       int64 `json:"push_leaf_right_shortcut"`
	PushLeafRightAtEnd          int64 `json:"push_leaf_right_at_end"`
	PushLeafRightAtEndNoSibling int64 `json:"push_leaf_right_at_end_no_sibling"`
	PushLeafRightAtEndNoRoom    int64 `json:"push_leaf_right_at_end_no_room"`
	PushLeafLeft                int64 `json:"push_leaf_left"`
	PushForDoubleSplit          int64 `json:"push_for_double_split"`
	ItemsMoved                  int64 `json:"items_moved"`
	BytesMoved                  int64 `json:"bytes_moved"`
	LeafSplits                  int64 `json:"leaf_splits"`
	DoubleSplits                int64 `json:"double_splits"`
	NodeSplits                  int64 `json:"node_splits"`
	NodePushes                  int64 `json:"node_pushes"`
	Merges                      int64 `json:"merges"`
	RootGrows                   int64 `json:"root_grows"`
	RootShrinks                 int64 `json:"root_shrinks"`
	BlocksAllocated             int64 `json:"blocks_allocated"`
	BlocksFreed                 int64 `json:"blocks_freed"`
	BlocksWritten               int64 `json:"blocks_written"`
}

// Snapshot reads every counter. Counters are read one by one, so a
// snapshot taken while operations run is not a consistent cut.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{
		Searches: s.Searches.Load(), SearchRestarts: s.SearchRestarts.Load(),
		BlocksCowed: s.BlocksCowed.Load(), SplitLeaf: s.SplitLeaf.Load(),
		PushLeafRight: s.PushLeafRight.Load(), PushLeafRightShortcut: s.PushLeafRightShortcut.Load(),
		PushLeafRightAtEnd: s.PushLeafRightAtEnd.Load(), PushLeafRightAtEndNoSibling: s.PushLeafRightAtEndNoSibling.Load(),
		PushLeafRightAtEndNoRoom: s.PushLeafRightAtEndNoRoom.Load(),
		PushLeafLeft:             s.PushLeafLeft.Load(), PushForDoubleSplit: s.PushForDoubleSplit.Load(),
		ItemsMoved: s.ItemsMoved.Load(), BytesMoved: s.BytesMoved.Load(),
		LeafSplits: s.LeafSplits.Load(), DoubleSplits: s.DoubleSplits.Load(),
		NodeSplits: s.NodeSplits.Load(), NodePushes: s.NodePushes.Load(), Merges: s.Merges.Load(),
		RootGrows: s.RootGrows.Load(), RootShrinks: s.RootShrinks.Load(),
		BlocksAllocated: s.BlocksAllocated.Load(), BlocksFreed: s.BlocksFreed.Load(),
		BlocksWritten: s.BlocksWritten.Load(),
	}
}

// Sub returns the counters of s minus those of o: what happened between
// two snapshots.
func (s StatsSnapshot) Sub(o StatsSnapshot) StatsSnapshot {
	return StatsSnapshot{
		Searches: s.Searches - o.Searches, SearchRestarts: s.SearchRestarts - o.SearchRestarts,
		BlocksCowed: s.BlocksCowed - o.BlocksCowed, SplitLeaf: s.SplitLeaf - o.SplitLeaf,
		PushLeafRight:               s.PushLeafRight - o.PushLeafRight,
		PushLeafRightShortcut:       s.PushLeafRightShortcut - o.PushLeafRightShortcut,
		PushLeafRightAtEnd:          s.PushLeafRightAtEnd - o.PushLeafRightAtEnd,
		PushLeafRightAtEndNoSibling: s.PushLeafRightAtEndNoSibling - o.PushLeafRightAtEndNoSibling,
		PushLeafRightAtEndNoRoom:    s.PushLeafRightAtEndNoRoom - o.PushLeafRightAtEndNoRoom,
		PushLeafLeft:                s.PushLeafLeft - o.PushLeafLeft, PushForDoubleSplit: s.PushForDoubleSplit - o.PushForDoubleSplit,
		ItemsMoved: s.ItemsMoved - o.ItemsMoved, BytesMoved: s.BytesMoved - o.BytesMoved,
		LeafSplits: s.LeafSplits - o.LeafSplits, DoubleSplits: s.DoubleSplits - o.DoubleSplits,
		NodeSplits: s.NodeSplits - o.NodeSplits, NodePushes: s.NodePushes - o.NodePushes,
		Merges: s.Merges - o.Merges, RootGrows: s.RootGrows - o.RootGrows, RootShrinks: s.RootShrinks - o.RootShrinks,
		BlocksAllocated: s.BlocksAllocated - o.BlocksAllocated, BlocksFreed: s.BlocksFreed - o.BlocksFreed,
		BlocksWritten: s.BlocksWritten - o.BlocksWritten,
	}
}
