package check

import (
	"fmt"
	"io"
)

// Kind names the class of a problem, so tests and programs can match on
// it without parsing messages. Kinds follow the phases of btrfs check.
type Kind string

// Problem kinds.
const (
	KindSuperblock  Kind = "superblock"  // superblock or backup roots
	KindRootItem    Kind = "root_item"   // a ROOT_ITEM or the tree it locates
	KindTreeBlock   Kind = "tree_block"  // checksum, header, key order, level, generation
	KindItem        Kind = "item"        // an item breaks the tree-checker's rules
	KindExtentRef   Kind = "extent_ref"  // extent item references against the trees
	KindBlockGroup  Kind = "block_group" // block group against chunks or extents
	KindChunk       Kind = "chunk"       // chunk, device item, device extent
	KindFreeSpace   Kind = "free_space"  // free-space tree against the extent tree
	KindInode       Kind = "inode"       // inode item, nlink, isize, nbytes, file extents
	KindDirItem     Kind = "dir_item"    // dir items and dir indexes, names and hashes
	KindCsum        Kind = "csum"        // csum tree items
	KindDataCsum    Kind = "data_csum"   // data whose checksum does not match
	KindRootRef     Kind = "root_ref"    // ROOT_REF/ROOT_BACKREF between subvolumes
	KindQuota       Kind = "quota"       // quota groups
	KindUnsupported Kind = "unsupported" // a feature this checker cannot verify yet
)

// Key is an item key, (objectid, type, offset), as btrfs check prints it.
type Key struct {
	ObjectID uint64 `json:"objectid"`
	Type     uint8  `json:"type"`
	Offset   uint64 `json:"offset"`
}

// String prints the key as btrfs check does: (objectid type offset).
func (k Key) String() string { return fmt.Sprintf("(%d %d %d)", k.ObjectID, k.Type, k.Offset) }

// Problem is one thing wrong with the filesystem.
type Problem struct {
	Kind Kind `json:"kind"`
	// Tree is the id of the tree the problem is in, 0 if none.
	Tree uint64 `json:"tree,omitempty"`
	// Key is the item concerned, if any.
	Key *Key `json:"key,omitempty"`
	// Addr is the logical address (tree block, extent) concerned, if any.
	Addr uint64 `json:"addr,omitempty"`
	// Message says what is wrong, in btrfs check's words where it reports
	// the same problem.
	Message string `json:"message"`
}

// String formats the problem as one output line.
func (p Problem) String() string { return p.Message }

// Summary holds the totals btrfs check prints at the end.
type Summary struct {
	// BytesUsed is the sum of the lengths of all extents (data and tree
	// blocks) in the extent tree: "found N bytes used".
	BytesUsed uint64 `json:"bytes_used"`
	// CsumBytes is the number of data bytes covered by the csum tree.
	CsumBytes uint64 `json:"total_csum_bytes"`
	// TreeBytes is the size of every tree block, each counted once.
	TreeBytes uint64 `json:"total_tree_bytes"`
	// FSTreeBytes is the share of TreeBytes in subvolume trees.
	FSTreeBytes uint64 `json:"total_fs_tree_bytes"`
	// ExtentTreeBytes is the share of TreeBytes in the extent tree.
	ExtentTreeBytes uint64 `json:"total_extent_tree_bytes"`
	// BtreeSpaceWaste is the unused space inside tree blocks.
	BtreeSpaceWaste uint64 `json:"btree_space_waste_bytes"`
	// DataBytesAllocated sums disk_num_bytes of every file extent item.
	DataBytesAllocated uint64 `json:"file_data_blocks_allocated"`
	// DataBytesReferenced sums num_bytes of every file extent item.
	DataBytesReferenced uint64 `json:"referenced"`
}

// Report is the result of a check.
type Report struct {
	// UUID is the filesystem's fsid.
	UUID string `json:"uuid"`
	// Problems lists each problem found once, in the order found.
	Problems []Problem `json:"problems"`
	Summary  Summary   `json:"summary"`
}

// Clean reports whether no problem was found.
func (r *Report) Clean() bool { return len(r.Problems) == 0 }

// WriteSummary prints the summary as btrfs check does.
func (r *Report) WriteSummary(w io.Writer) {
	s := r.Summary
	verdict := "no error found"
	if !r.Clean() {
		verdict = "error(s) found"
	}
	fmt.Fprintf(w, "found %d bytes used, %s\n", s.BytesUsed, verdict)
	fmt.Fprintf(w, "total csum bytes: %d\n", s.CsumBytes)
	fmt.Fprintf(w, "total tree bytes: %d\n", s.TreeBytes)
	fmt.Fprintf(w, "total fs tree bytes: %d\n", s.FSTreeBytes)
	fmt.Fprintf(w, "total extent tree bytes: %d\n", s.ExtentTreeBytes)
	fmt.Fprintf(w, "btree space waste bytes: %d\n", s.BtreeSpaceWaste)
	fmt.Fprintf(w, "file data blocks allocated: %d\n", s.DataBytesAllocated)
	fmt.Fprintf(w, " referenced %d\n", s.DataBytesReferenced)
}
