package txn

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// verifyOpenTrees reads and checks every block of the two trees an open
// for writing always reads whole: the chunk tree and the root tree. Each
// block is verified as ReadBlock does (checksum of some good copy, header
// fsid, bytenr, level, generation, owner and first key against its
// parent, and the tree-checker's item rules).
//
// The other trees are not read at open: their blocks are verified when a
// change or a commit first reads them, the same checks, and a change that
// meets damage fails with an error wrapping disk.ErrCorrupt that names
// the tree and block; the transaction it ran in is aborted and nothing is
// written (docs/design/0009, "Open cost"). So the cost of an open does not
// grow with the size of the filesystem, as the kernel's mount, whose
// tree-checker also works block by block, as blocks are read.
func (fs *FS) verifyOpenTrees() error {
	if err := fs.verifyTree(fs.chunkRoot()); err != nil {
		return err
	}
	return fs.verifyTree(fs.rootTreeRoot())
}

// verifyTree walks one tree, reading every block. A failure names the
// tree and the block that could not be read; corruption keeps wrapping
// disk.ErrCorrupt, I/O errors stay I/O errors.
func (fs *FS) verifyTree(root ctree.Root) error {
	if root.Level < 0 || root.Level >= disk.MaxLevel {
		return &disk.CorruptError{Logical: root.Addr, Tree: root.Owner, What: fmt.Sprintf("root level %d", root.Level)}
	}
	r := &verifyReader{fs: fs}
	err := ctree.Walk(r, root, func(disk.Node, int) error { return nil })
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
