package btrfs

import (
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// This file gives the module's own tools (dump-tree, info, check) the
// layers under the filesystem. Its results carry internal types, so code
// outside this module cannot use them; that is intended.

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

// BlockReader returns the reader of verified tree blocks.
func (fsys *FS) BlockReader() ctree.Reader { return fsys.blocks }

// ChunkRoot and RootTree locate the two trees the superblock points to.
func (fsys *FS) ChunkRoot() ctree.Root {
	sb := fsys.sb
	return ctree.Root{Addr: sb.ChunkRoot, Level: int(sb.ChunkRootLevel), Generation: sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID}
}

// RootTree locates the tree of tree roots.
func (fsys *FS) RootTree() ctree.Root { return fsys.rootTree }

// ChunkMap returns the logical to physical map.
func (fsys *FS) ChunkMap() *chunk.Map { return fsys.chunks }

// Trees lists every tree with a ROOT_ITEM in the root tree, in key order.
func (fsys *FS) Trees() ([]TreeRoot, error) {
	fsys.rlock()
	defer fsys.runlock()
	c := fsys.cursor(fsys.rootTree)
	var out []TreeRoot
	ok, err := c.First()
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.Type != disk.RootItemKey {
			continue
		}
		var ri disk.RootItem
		if derr := ri.Decode(c.Data()); derr != nil {
			return out, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k, What: "root item", Err: derr}
		}
		out = append(out, TreeRoot{ID: k.ObjectID, Key: k, Item: ri,
			Root: ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: k.ObjectID}})
	}
	return out, err
}

// ReadBlockAt reads and verifies the tree block at addr without knowing
// its parent (dump-tree -b).
func (fsys *FS) ReadBlockAt(addr disk.LogicalAddr) (disk.Node, error) {
	return fsys.blocks.ReadBlock(addr, disk.Expect{Bytenr: addr, Level: -1})
}
