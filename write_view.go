package btrfs

import (
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// txBlocks serves tree blocks to the read path of a writable FS while a
// transaction runs: the transaction's own version of a block when its
// table holds one (blocks it created are not checksummed until Commit, so
// only the header is checked against the parent's promise), the committed
// block reader otherwise. Addresses the transaction freed are pinned until
// its commit, so a committed block read through base is never stale.
type txBlocks struct {
	base *blockReader
	tx   *ctree.Trans
}

// ReadBlock implements ctree.Reader.
func (r *txBlocks) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	if n, ok := r.tx.Snapshot(addr); ok {
		if err := n.CheckExpect(r.base.params, e); err != nil {
			return nil, err
		}
		return n, nil
	}
	return r.base.ReadBlock(addr, e)
}

// showTxn points the read side at the running transaction: blocks through
// its table, the top-level subvolume at the tree's current root. The
// committed view of the subvolume is kept in w.committedTop.
func (fsys *FS) showTxn(tx *ctree.Trans, tr *ctree.Tree) {
	w := fsys.w
	if w.committedTop == nil {
		w.committedTop = fsys.top
	}
	top := *w.committedTop
	top.root = tr.Root()
	fsys.blocks = &txBlocks{base: fsys.br, tx: tx}
	fsys.top = &top
	fsys.mu.Lock()
	fsys.subvols[top.id] = &top
	fsys.mu.Unlock()
}

// showCommitted points the read side back at the last commit, after an
// abort.
func (fsys *FS) showCommitted() {
	w := fsys.w
	if w.committedTop == nil {
		return
	}
	fsys.blocks = fsys.br
	fsys.top = w.committedTop
	fsys.mu.Lock()
	fsys.subvols[fsys.top.id] = fsys.top
	fsys.mu.Unlock()
	w.committedTop = nil
}
