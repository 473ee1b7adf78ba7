package btrfs

import (
	"slices"
	"sync"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// txBlocks serves tree blocks to the read path of a writable FS while a
// transaction runs: the transaction's own version of a block when its
// table holds one (blocks it created are not checksummed until Commit, so
// only the header is checked against the parent's promise), the committed
// block reader otherwise. Addresses the transaction freed are pinned until
// its commit, so a committed block read through base is never stale.
//
// Copies of the transaction's blocks are kept (memo) and shared by the
// reads that follow, across changes, until the block changes: each read
// asks the engine whether the block is still at the version copied
// (ctree.Trans.SnapshotVersion), so a change alters only the copies of
// the blocks it touched. A lookup-heavy load, such as a FUSE mount
// creating files, reads the same few blocks between every two changes.
// Readers never modify a node.
type txBlocks struct {
	base *blockReader
	tx   *ctree.Trans
	memo *blockMemo
}

// blockMemo is the copies of one transaction's blocks.
type blockMemo struct {
	mu sync.Mutex
	m  map[disk.LogicalAddr]memoBlock
}

type memoBlock struct {
	n disk.Node
	v ctree.BlockVersion
}

// maxMemo bounds the copies kept: past it they are dropped and made
// again as reads need them (about 64 MiB of 16 KiB blocks).
const maxMemo = 4096

// ReadBlock implements ctree.Reader.
func (r *txBlocks) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	r.memo.mu.Lock()
	had := r.memo.m[addr]
	r.memo.mu.Unlock()
	n, v, ok := r.tx.SnapshotVersion(addr, had.v, had.n)
	if !ok {
		return r.base.ReadBlock(addr, e)
	}
	if n == nil {
		n = had.n
		if v != had.v {
			r.memo.mu.Lock()
			r.memo.m[addr] = memoBlock{n: n, v: v}
			r.memo.mu.Unlock()
		}
	} else {
		r.memo.mu.Lock()
		if r.memo.m == nil || len(r.memo.m) >= maxMemo {
			r.memo.m = map[disk.LogicalAddr]memoBlock{}
		}
		r.memo.m[addr] = memoBlock{n: n, v: v}
		r.memo.mu.Unlock()
	}
	if err := n.CheckExpect(r.base.blockParams(), e); err != nil {
		return nil, err
	}
	return n, nil
}

// committedView is what the read side showed at the last commit, kept
// while it shows a running transaction.
type committedView struct {
	top      *subvol
	rootTree ctree.Root
	csumRoot ctree.Root
	subvols  map[disk.ObjectID]*subvol // the transaction's subvolumes, by id
}

// showTxn points the read side at the running transaction t: blocks
// through its table, data also through its chunk map (chunks it added),
// and the root, csum and subvolume trees it opened at their current roots.
func (fsys *FS) showTxn(t *txn.Txn) error {
	w := fsys.w
	if w.committed == nil {
		w.committed = &committedView{top: fsys.top, rootTree: fsys.rootTree, csumRoot: fsys.csumRoot,
			subvols: map[disk.ObjectID]*subvol{}}
	}
	if tb, ok := fsys.blocks.(*txBlocks); !ok || tb.tx != t.Trans() {
		fsys.blocks = &txBlocks{base: fsys.br, tx: t.Trans(), memo: &blockMemo{}}
	}
	if cur, ok := fsys.data.(*txnDataReader); !ok || cur.t != t {
		base := fsys.data
		if ok {
			base = cur.base
		}
		fsys.data = &txnDataReader{base: base, t: t}
	}
	ids := t.OpenedTrees()
	slices.Sort(ids) // the root tree (1) first: subvolumes are found through it
	for _, id := range ids {
		tr, err := t.Tree(id)
		if err != nil {
			return err
		}
		switch {
		case id == disk.RootTreeObjectID:
			fsys.rootTree = tr.Root()
		case id == disk.CsumTreeObjectID:
			fsys.csumRoot = tr.Root()
		case id == disk.FSTreeObjectID || (id >= disk.FirstFreeObjectID && id <= disk.LastFreeObjectID):
			if err := fsys.showSubvol(id, tr.Root()); err != nil {
				return err
			}
		}
	}
	return nil
}

// showSubvol makes subvolume id read from root.
func (fsys *FS) showSubvol(id disk.ObjectID, root ctree.Root) error {
	cv := fsys.w.committed
	base := cv.subvols[id]
	if base == nil {
		if id == cv.top.id {
			base = cv.top
		} else {
			item, err := fsys.rootItem(id)
			if err != nil {
				return err
			}
			base = &subvol{id: id, item: *item, dirID: item.RootDirID}
			if base.dirID == 0 {
				base.dirID = disk.FirstFreeObjectID
			}
		}
		cv.subvols[id] = base
	}
	sv := *base
	sv.root = root
	fsys.mu.Lock()
	fsys.subvols[id] = &sv
	fsys.mu.Unlock()
	if id == cv.top.id {
		fsys.top = &sv
	}
	return nil
}

// showCommitted points the read side back at the last commit, after an
// abort.
func (fsys *FS) showCommitted() {
	cv := fsys.w.committed
	if cv == nil {
		return
	}
	fsys.blocks = fsys.br
	fsys.top, fsys.rootTree, fsys.csumRoot = cv.top, cv.rootTree, cv.csumRoot
	if cur, ok := fsys.data.(*txnDataReader); ok {
		fsys.data = cur.base
	}
	fsys.mu.Lock()
	clear(fsys.subvols)
	fsys.subvols[cv.top.id] = cv.top
	fsys.mu.Unlock()
	fsys.w.committed = nil
	fsys.w.version.Add(1)
	fsys.w.main.publish()
}
