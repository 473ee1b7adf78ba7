package fsview

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TreeRoot names one tree and where its root block is.
type TreeRoot struct {
	// ID is the tree id (ROOT_ITEM objectid).
	ID disk.ObjectID
	// Key is the ROOT_ITEM key in the root tree (zero for the root and
	// chunk trees, which the superblock locates).
	Key disk.Key
	// Root locates the root block.
	Root ctree.Root
	// Item is the decoded ROOT_ITEM (zero for the root and chunk trees).
	Item disk.RootItem
}

// View is the inside of one open filesystem. It is safe for concurrent
// use as the FS is.
type View interface {
	// Superblock returns a copy of the superblock of the last commit
	// (the one the filesystem was opened from, for read-only opens).
	Superblock() disk.Superblock
	// BlockReader returns the reader of verified tree blocks.
	BlockReader() ctree.Reader
	// ChunkRoot locates the chunk tree the superblock points to.
	ChunkRoot() ctree.Root
	// RootTree locates the tree of tree roots.
	RootTree() ctree.Root
	// ChunkMap returns the logical to physical map.
	ChunkMap() *chunk.Map
	// Trees lists every tree with a ROOT_ITEM in the root tree, in key
	// order.
	Trees() ([]TreeRoot, error)
	// ReadBlockAt reads and verifies the tree block at addr without
	// knowing its parent (dump-tree -b).
	ReadBlockAt(addr disk.LogicalAddr) (disk.Node, error)
}

// of is set once, by package btrfs's init, before any FS exists.
var of func(fsys any) (View, bool)

// Register installs the accessor; only package btrfs calls it.
func Register(f func(fsys any) (View, bool)) { of = f }

// Of returns the view of fsys, a *btrfs.FS. Anything else is a
// programming error of the caller and panics.
func Of(fsys any) View {
	if of == nil {
		panic("fsview: package btrfs not linked in")
	}
	v, ok := of(fsys)
	if !ok {
		panic(fmt.Sprintf("fsview.Of: %T is not a *btrfs.FS", fsys))
	}
	return v
}
