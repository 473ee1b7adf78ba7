package txn

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// verifyMetadata reads and checks every tree block reachable from the
// committed superblock: the chunk tree, the root tree, and every tree a
// ROOT_ITEM of the root tree points at. Each block is verified as
// ReadBlock does (checksum of some good copy, header fsid, bytenr, level,
// generation, owner and first key against its parent).
//
// Open runs it before anything can be written, so that a damaged image is
// refused read-write with an error naming the tree and block instead of
// a transaction failing half way through (or, worse, copying a damaged
// block into a new commit). Its cost is one read of all metadata: for
// an image with gigabytes of metadata, opening takes as long as reading
// it, which is the price of not writing to a filesystem we have not seen.
func (fs *FS) verifyMetadata() error {
	if err := fs.verifyTree(fs.chunkRoot(), nil); err != nil {
		return err
	}
	var roots []ctree.Root
	err := fs.verifyTree(fs.rootTreeRoot(), func(n disk.Node) error {
		for i := 0; i < n.NumItems(); i++ {
			k := n.Key(i)
			if k.Type != disk.RootItemKey {
				continue
			}
			var ri disk.RootItem
			if err := ri.Decode(n.ItemData(i)); err != nil {
				return &disk.CorruptError{Logical: n.Bytenr(), Tree: disk.RootTreeObjectID, Key: &k, What: "root item", Err: err}
			}
			roots = append(roots, ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: k.ObjectID})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range roots {
		if err := fs.verifyTree(r, nil); err != nil {
			return err
		}
	}
	return nil
}

// verifyTree walks one tree, reading every block, and hands every leaf
// to leaf (if not nil). A failure names the tree and the block that
// could not be read; corruption keeps wrapping disk.ErrCorrupt, I/O
// errors stay I/O errors.
func (fs *FS) verifyTree(root ctree.Root, leaf func(disk.Node) error) error {
	if root.Level < 0 || root.Level >= disk.MaxLevel {
		return &disk.CorruptError{Logical: root.Addr, Tree: root.Owner, What: fmt.Sprintf("root level %d", root.Level)}
	}
	r := &verifyReader{fs: fs}
	err := ctree.Walk(r, root, func(n disk.Node, _ int) error {
		if leaf == nil || !n.IsLeaf() {
			return nil
		}
		return leaf(n)
	})
	switch {
	case err == nil:
		return nil
	case r.bad == 0:
		// The blocks were fine; an item of a leaf was not.
		return err
	case errors.Is(err, disk.ErrCorrupt):
		return &disk.CorruptError{Logical: r.bad, Tree: root.Owner, What: "metadata verification failed, refusing to open read-write", Err: err}
	}
	return fmt.Errorf("verify tree %s block %d: %w", root.Owner.TreeName(), r.bad, err)
}

// verifyReader is FS.ReadBlock remembering the block that failed, so the
// error of a walk can name it.
type verifyReader struct {
	fs  *FS
	bad disk.LogicalAddr
}

// ReadBlock implements ctree.Reader.
func (r *verifyReader) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	n, err := r.fs.ReadBlock(addr, e)
	if err != nil {
		r.bad = addr
	}
	return n, err
}
