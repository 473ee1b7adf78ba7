package btrfs

import (
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// This file gives the module's own tools (dump-tree, info, check, tests)
// the layers under the filesystem through internal/fsview. They carry
// internal types, so they are not methods of FS: the exported API names
// public types only (docs/design/0014-public-api.md).

func init() {
	fsview.Register(func(f any) (fsview.View, bool) {
		fsys, ok := f.(*FS)
		if !ok || fsys == nil {
			return nil, false
		}
		return inside{fsys}, true
	})
}

// inside implements fsview.View; its methods are exported only to satisfy
// the interface, and the type is not.
type inside struct{ fsys *FS }

func (v inside) Superblock() disk.Superblock { return v.fsys.superblock() }
func (v inside) BlockReader() ctree.Reader   { return v.fsys.blocks }
func (v inside) ChunkRoot() ctree.Root       { return v.fsys.chunkRoot() }
func (v inside) RootTree() ctree.Root        { return v.fsys.rootTree }
func (v inside) ChunkMap() *chunk.Map        { return v.fsys.chunks }
func (v inside) Trees() ([]fsview.TreeRoot, error) {
	return v.fsys.trees()
}
func (v inside) ReadBlockAt(addr disk.LogicalAddr) (disk.Node, error) {
	return v.fsys.blocks.ReadBlock(addr, disk.Expect{Bytenr: addr, Level: -1})
}

// superblock returns a copy of the superblock of the last commit (the one
// the filesystem was opened from, for read-only opens).
func (fsys *FS) superblock() disk.Superblock {
	fsys, done := fsys.reader()
	defer done()
	return *fsys.sb
}

// chunkRoot locates the chunk tree the superblock points to.
func (fsys *FS) chunkRoot() ctree.Root {
	sb := fsys.sb
	return ctree.Root{Addr: sb.ChunkRoot, Level: int(sb.ChunkRootLevel), Generation: sb.ChunkRootGeneration, Owner: disk.ChunkTreeObjectID}
}

// trees lists every tree with a ROOT_ITEM in the root tree, in key order.
func (fsys *FS) trees() ([]fsview.TreeRoot, error) {
	fsys, done := fsys.reader()
	defer done()
	c := fsys.cursor(fsys.rootTree)
	var out []fsview.TreeRoot
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
		out = append(out, fsview.TreeRoot{ID: k.ObjectID, Key: k, Item: ri,
			Root: ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: k.ObjectID}})
	}
	return out, err
}
