package txn

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// DropPlan is what dropping a subvolume tree takes, worked out by
// PlanDrop before anything changes and carried out by Drop.
type DropPlan struct {
	id    disk.ObjectID
	key   disk.Key        // its ROOT_ITEM
	free  []treeBlock     // blocks only this tree references: freed
	unref []treeBlock     // blocks other trees share: this tree's reference goes
	data  []dataRefChange // the data references of its file extents
	// sharedData are changes of references by parent leaf
	// (SHARED_DATA_REF): dropped for the file extents of the
	// FULL_BACKREF leaves it frees, added for those of the leaves it
	// turns into FULL_BACKREF ones.
	sharedData []sharedDataChange
	// full are the blocks this tree owns that others still reach: they
	// get FULL_BACKREF, and refs their children's references keyed by
	// this tree turned into references by their address.
	full  []treeBlock
	refs  []treeRefChange
	bytes uint64 // tree bytes freed
}

// treeRefChange is a reference of a tree block added (n > 0) or
// removed (n < 0).
type treeRefChange struct {
	addr  disk.LogicalAddr
	level int
	ref   treeRef
	n     int
}

// treeBlock is a tree block's address and level, and the reference
// the dropped tree holds on it.
type treeBlock struct {
	addr  disk.LogicalAddr
	level int
	ref   treeRef
}

// dataRefChange is one EXTENT_DATA_REF of a tree: the extent and the
// (inode, file position less extent offset) of the tree's reference.
type dataRefChange struct {
	bytenr   disk.LogicalAddr
	numBytes uint64
	ino      disk.ObjectID
	offset   uint64
}

// sharedDataChange is one reference by parent leaf: the data extent and
// the leaf whose file extent item names it.
type sharedDataChange struct {
	bytenr   disk.LogicalAddr
	numBytes uint64
	parent   disk.LogicalAddr
	n        int64
}

// Shared reports whether the tree shares blocks with other trees: its
// drop then only takes its references off some blocks, and what the
// plan counted changes when another tree's drop or copy changes theirs
// (a plan without shared blocks stays true: its blocks are its own).
func (p *DropPlan) Shared() bool { return len(p.unref) > 0 }

// PlanDrop works out how to drop subvolume tree id, as the kernel's
// cleaner drops a deleted subvolume: every block only this tree
// references is freed, with the data references of the file extents in
// its leaves; at a block other trees share (a snapshot's) only this
// tree's reference goes. Before it goes, the blocks this tree owns that
// the others reach through it (the shared block and, below it, every
// block this tree owns) are turned to name their children by address,
// as the kernel's drop does (its UPDATE_BACKREF stage; planShared), so
// that nothing keeps a reference keyed by the dropped tree. Below a
// FULL_BACKREF block that is freed, the children lose the references by
// its address (planBlock): tree blocks their SHARED_BLOCK_REF, the data
// extents of a leaf their SHARED_DATA_REF. It reads and checks every block it visits and
// changes nothing: references are found where they are (inline or as
// items of their own); a tree changed in this transaction is refused
// with ErrTreeChanged. The caller removes the
// subvolume's names; Drop then removes the tree and its ROOT_ITEM.
func (t *Txn) PlanDrop(id disk.ObjectID) (*DropPlan, error) {
	if t.done {
		return nil, fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	if id < disk.FirstFreeObjectID || id > disk.LastFreeObjectID {
		return nil, fmt.Errorf("%w: dropping tree %d, not a subvolume", ErrUnsupported, id)
	}
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return nil, err
	}
	ri, key, err := t.lookupRootItem(rt, id)
	if err != nil {
		return nil, err
	}
	if tr := t.trees[id]; tr != nil && tr.Root().Generation >= t.gen {
		return nil, ErrTreeChanged
	}
	p := &DropPlan{id: id, key: key}
	root := disk.Expect{Bytenr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: id, OwnerAny: true}
	via := treeRef{disk.TreeBlockRefKey, uint64(id)}
	if ri.DropProgress.ObjectID != 0 {
		// The kernel's cleaner dropped part of the tree already.
		if ri.Refs != 0 {
			return nil, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &key, What: "drop_progress set on a subvolume with references"}
		}
		if ri.DropLevel == 0 || int(ri.DropLevel) > root.Level {
			return nil, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &key,
				What: fmt.Sprintf("drop_level %d with a root of level %d", ri.DropLevel, root.Level)}
		}
		if err := t.planRest(p, root, via, ri.DropProgress, int(ri.DropLevel)); err != nil {
			return nil, err
		}
		return p, nil
	}
	if err := t.planBlock(p, root, via, true); err != nil {
		return nil, err
	}
	return p, nil
}

// planRest adds to p what is left of a tree the kernel's cleaner dropped
// part of: it walks the tree in key order and records how far it got as
// a node key (progress) at a level (dropLevel), committed with each of
// its transactions. Everything before that point is gone already (the
// blocks dropped, though the nodes on the path to it still point at
// them); the nodes on the path from the root down to dropLevel are this
// tree's alone (one reference) and still whole. So, at each node of the
// path: its child holding progress (the last key not above it) is the
// path's next node, or at dropLevel the first child still to drop; the
// children after it are dropped as planBlock drops any block; those
// before it are skipped; and the node itself is freed.
func (t *Txn) planRest(p *DropPlan, e disk.Expect, via treeRef, progress disk.Key, dropLevel int) error {
	x, err := t.treeBlockExtent(e.Bytenr, e.Level)
	if err != nil {
		return err
	}
	if x.item.Refs != 1 || !x.has(via) {
		return &disk.CorruptError{Logical: e.Bytenr, Tree: p.id,
			What: fmt.Sprintf("block on the path of a half-done drop of tree %d with %d references, or without its %v reference %d", p.id, x.item.Refs, via.typ, via.off)}
	}
	n, err := t.ReadBlock(e.Bytenr, e)
	if err != nil {
		return err
	}
	full := x.full()
	if !full && n.Owner() != p.id {
		return &disk.CorruptError{Logical: e.Bytenr, Tree: p.id,
			What: fmt.Sprintf("tree block owned by tree %d, referenced only from tree %d, without FULL_BACKREF", n.Owner(), p.id)}
	}
	if n.IsLeaf() {
		return &disk.CorruptError{Logical: e.Bytenr, Tree: p.id, What: "leaf on the path to a drop's progress"}
	}
	p.free = append(p.free, treeBlock{e.Bytenr, e.Level, via})
	p.bytes += uint64(t.fs.sb.NodeSize)
	childVia := treeRef{disk.TreeBlockRefKey, uint64(p.id)}
	if full {
		childVia = treeRef{disk.SharedBlockRefKey, uint64(e.Bytenr)}
	}
	s := 0
	for i := range n.NumItems() {
		if n.Key(i).Compare(progress) <= 0 {
			s = i
		}
	}
	for i := s; i < n.NumItems(); i++ {
		kp := n.KeyPtr(i)
		k := kp.Key
		ce := disk.Expect{Bytenr: kp.BlockPtr, Level: n.Level() - 1, Generation: kp.Generation,
			Owner: p.id, OwnerAny: true, FirstKey: &k}
		if i == s && n.Level() > dropLevel {
			err = t.planRest(p, ce, childVia, progress, dropLevel)
		} else {
			err = t.planBlock(p, ce, childVia, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// OrphanTree marks subvolume tree id deleted but not dropped, as the
// kernel's subvolume deletion leaves a tree for its cleaner: its
// ROOT_ITEM gets refs 0 (drop_progress stays as it is, zero: not begun)
// and the root tree an ORPHAN_ITEM (ORPHAN, ORPHAN_ITEM, id) with no
// body. The tree and its references are not touched; the kernel's
// cleaner drops it at a read-write mount, and FS.DeadTrees names it at
// the next open. The caller removes the subvolume's links and UUID
// entries.
func (t *Txn) OrphanTree(id disk.ObjectID) error {
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	_, key, err := t.lookupRootItem(rt, id)
	if err != nil {
		return err
	}
	err = rt.UpdateItem(t.tx, key, func(b []byte) error {
		var ri disk.RootItem
		if err := ri.Decode(b); err != nil {
			return err
		}
		ri.Refs = 0
		ri.Encode(b)
		return nil
	})
	if err != nil {
		return err
	}
	return rt.InsertItem(t.tx, disk.Key{ObjectID: disk.OrphanObjectID, Type: disk.OrphanItemKey, Offset: uint64(id)}, nil)
}

// DeleteOrphanRoot deletes the ORPHAN_ITEM the kernel keeps in the root
// tree for subvolume id while its deleted tree is being dropped; it is
// not an error when there is none.
func (t *Txn) DeleteOrphanRoot(id disk.ObjectID) error {
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	k := disk.Key{ObjectID: disk.OrphanObjectID, Type: disk.OrphanItemKey, Offset: uint64(id)}
	if _, found, err := rt.Lookup(t.tx, k); err != nil || !found {
		return err
	}
	_, err = rt.DeleteItem(t.tx, k)
	return err
}

// planBlock adds the block e names to p: freed (and its children
// visited) when via, the reference this tree's path holds on it, is its
// last; only via dropped when other references remain. The reference is
// keyed by this tree for the root and below a block that names its
// children by root, and by the parent's address below a FULL_BACKREF
// block (as the copies of shared blocks leave them, rules 1 to 3 of
// cow.go). The root is always this tree's alone.
func (t *Txn) planBlock(p *DropPlan, e disk.Expect, via treeRef, root bool) error {
	x, err := t.treeBlockExtent(e.Bytenr, e.Level)
	if err != nil {
		return err
	}
	if !x.has(via) {
		return &disk.CorruptError{Logical: e.Bytenr, Tree: p.id, What: fmt.Sprintf("tree block reached from tree %d has no %v reference %d", p.id, via.typ, via.off)}
	}
	n, err := t.ReadBlock(e.Bytenr, e)
	if err != nil {
		return err
	}
	full := x.full()
	if x.item.Refs > 1 {
		if root {
			return fmt.Errorf("%w: the root block of tree %d is shared", ErrUnsupported, p.id)
		}
		if n.Owner() == p.id {
			// Other trees reach this block, and what lies below it
			// may name this tree in its references: those become
			// references by parent block first.
			if err := t.planShared(p, n, full); err != nil {
				return err
			}
		}
		p.unref = append(p.unref, treeBlock{e.Bytenr, e.Level, via})
		return nil
	}
	if !full && n.Owner() != p.id {
		return &disk.CorruptError{Logical: e.Bytenr, Tree: p.id,
			What: fmt.Sprintf("tree block owned by tree %d, referenced only from tree %d, without FULL_BACKREF", n.Owner(), p.id)}
	}
	p.free = append(p.free, treeBlock{e.Bytenr, e.Level, via})
	p.bytes += uint64(t.fs.sb.NodeSize)
	childVia := treeRef{disk.TreeBlockRefKey, uint64(p.id)}
	if full {
		childVia = treeRef{disk.SharedBlockRefKey, uint64(e.Bytenr)}
	}
	if !n.IsLeaf() {
		for i := range n.NumItems() {
			kp := n.KeyPtr(i)
			k := kp.Key
			ce := disk.Expect{Bytenr: kp.BlockPtr, Level: n.Level() - 1, Generation: kp.Generation,
				Owner: p.id, OwnerAny: true, FirstKey: &k}
			if err := t.planBlock(p, ce, childVia, false); err != nil {
				return err
			}
		}
		return nil
	}
	if full {
		// The leaf names its data extents by its address
		// (SHARED_DATA_REF, one per file extent item): those go.
		return leafDataRefs(n, p.id, func(d dataRefChange) error {
			p.sharedData = append(p.sharedData, sharedDataChange{d.bytenr, d.numBytes, e.Bytenr, -1})
			return nil
		})
	}
	return leafDataRefs(n, p.id, func(d dataRefChange) error {
		p.data = append(p.data, d)
		return nil
	})
}

// planShared adds to p what keeps block n, which tree p.id owns and other
// trees still reach (through a shared block above it, or sharing it
// themselves), whole once p.id is gone: its children referenced by its
// address instead of by p.id (rule 2 of cow.go: FULL_BACKREF on it,
// SHARED_BLOCK_REF / SHARED_DATA_REF by its address for its children in
// place of their TREE_BLOCK_REF / EXTENT_DATA_REF of p.id), unless it has
// FULL_BACKREF already; then the same for every child p.id owns, except
// FULL_BACKREF leaves (nothing below them names p.id). Children owned by
// other trees name their own children by their owner or by address, so
// the walk stops there.
func (t *Txn) planShared(p *DropPlan, n disk.Node, full bool) error {
	a, level := n.Bytenr(), n.Level()
	mine := treeRef{disk.TreeBlockRefKey, uint64(p.id)}
	if !full {
		p.full = append(p.full, treeBlock{addr: a, level: level})
		if n.IsLeaf() {
			return leafDataRefs(n, p.id, func(d dataRefChange) error {
				p.data = append(p.data, d)
				p.sharedData = append(p.sharedData, sharedDataChange{d.bytenr, d.numBytes, a, 1})
				return nil
			})
		}
	}
	if n.IsLeaf() {
		return nil
	}
	for i := range n.NumItems() {
		kp := n.KeyPtr(i)
		k := kp.Key
		c := disk.Expect{Bytenr: kp.BlockPtr, Level: level - 1, Generation: kp.Generation,
			Owner: p.id, OwnerAny: true, FirstKey: &k}
		cx, err := t.treeBlockExtent(c.Bytenr, c.Level)
		if err != nil {
			return err
		}
		cfull := cx.full()
		if !full {
			if !cx.has(mine) {
				return &disk.CorruptError{Logical: c.Bytenr, Tree: p.id,
					What: fmt.Sprintf("tree block below block %d of tree %d (no FULL_BACKREF) has no reference keyed by the tree", a, p.id)}
			}
			p.refs = append(p.refs,
				treeRefChange{c.Bytenr, c.Level, mine, -1},
				treeRefChange{c.Bytenr, c.Level, treeRef{disk.SharedBlockRefKey, uint64(a)}, 1})
		}
		if c.Level == 0 && cfull {
			continue
		}
		cn, err := t.ReadBlock(c.Bytenr, c)
		if err != nil {
			return err
		}
		if cn.Owner() != p.id {
			continue
		}
		if err := t.planShared(p, cn, cfull); err != nil {
			return err
		}
	}
	return nil
}

// Drop carries out p: the tree's references are dropped (recorded for
// the commit, treerefs.go: the blocks only it referenced lose their last
// one and are freed there, with their extent items), the data references
// of its file extents dropped (extents with none left are freed at the
// commit, with their checksums), and its ROOT_ITEM deleted. It returns
// the tree bytes freed.
func (t *Txn) Drop(p *DropPlan) (uint64, error) {
	for _, b := range p.full {
		t.setTreeFlags(b.addr, b.level, disk.ExtentFlagFullBackref)
	}
	for _, r := range p.refs {
		t.addTreeRef(r.addr, r.level, r.ref, r.n)
	}
	for _, b := range p.unref {
		t.addTreeRef(b.addr, b.level, b.ref, -1)
	}
	for _, b := range p.free {
		t.addTreeRef(b.addr, b.level, b.ref, -1)
	}
	for _, d := range p.data {
		if err := t.DropDataRef(d.bytenr, d.numBytes, p.id, d.ino, d.offset, 1); err != nil {
			return 0, err
		}
	}
	for _, d := range p.sharedData {
		if err := t.addSharedDataRef(d.bytenr, d.numBytes, d.parent, d.n); err != nil {
			return 0, err
		}
	}
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return 0, err
	}
	if _, err := rt.DeleteItem(t.tx, p.key); err != nil {
		return 0, err
	}
	delete(t.trees, p.id)
	delete(t.rootKeys, p.id)
	delete(t.usedBase, p.id)
	return p.bytes, nil
}

// leafDataRefs calls fn with the data reference of each file extent item
// of leaf n (tree id) that names an extent: inline extents and holes name
// none.
func leafDataRefs(n disk.Node, id disk.ObjectID, fn func(dataRefChange) error) error {
	for i := range n.NumItems() {
		k := n.Key(i)
		if k.Type != disk.ExtentDataKey {
			continue
		}
		var fe disk.FileExtentItem
		if err := fe.Decode(n.ItemData(i)); err != nil {
			return &disk.CorruptError{Logical: n.Bytenr(), Tree: id, Key: &k, What: "file extent", Err: err}
		}
		if fe.Type == disk.FileExtentInline || fe.DiskBytenr == 0 {
			continue
		}
		if err := fn(dataRefChange{fe.DiskBytenr, fe.DiskNumBytes, k.ObjectID, k.Offset - fe.Offset}); err != nil {
			return err
		}
	}
	return nil
}
