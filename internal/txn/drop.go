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
	bytes uint64          // tree bytes freed
}

// treeBlock is a tree block's address and level.
type treeBlock struct {
	addr  disk.LogicalAddr
	level int
}

// dataRefChange is one EXTENT_DATA_REF of a tree: the extent and the
// (inode, file position less extent offset) of the tree's reference.
type dataRefChange struct {
	bytenr   disk.LogicalAddr
	numBytes uint64
	ino      disk.ObjectID
	offset   uint64
}

// PlanDrop works out how to drop subvolume tree id, as the kernel's
// cleaner drops a deleted subvolume: every block only this tree
// references is freed, with the data references of the file extents in
// its leaves; at a block other trees share (a snapshot's) only this
// tree's reference goes, and nothing below it is visited (so a source
// whose snapshots survive it, whose shared blocks it owns, is refused:
// their references would have to become references by parent). It reads and
// checks every block it visits and changes nothing: a tree whose blocks
// carry references this package does not write (FULL_BACKREF, shared
// block refs) is refused with ErrUnsupported here, and a tree changed in
// this transaction with ErrTreeChanged. The caller removes the
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
	if ri.DropLevel != 0 || ri.DropProgress != (disk.Key{}) {
		return nil, fmt.Errorf("%w: subvolume %d is being dropped by the kernel (drop_progress set)", ErrUnsupported, id)
	}
	p := &DropPlan{id: id, key: key}
	root := disk.Expect{Bytenr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: id, OwnerAny: true}
	if err := t.planBlock(p, root, true); err != nil {
		return nil, err
	}
	return p, nil
}

// planBlock adds the block e names to p: freed (and its children
// visited) when this tree is its only referrer, its reference dropped
// when others share it. The root is always this tree's alone.
func (t *Txn) planBlock(p *DropPlan, e disk.Expect, root bool) error {
	refs, mine, err := t.treeBlockRefs(e.Bytenr, e.Level, p.id)
	if err != nil {
		return err
	}
	if !mine {
		return &disk.CorruptError{Logical: e.Bytenr, Tree: p.id, What: fmt.Sprintf("tree block reached from tree %d has no reference from it", p.id)}
	}
	n, err := t.ReadBlock(e.Bytenr, e)
	if err != nil {
		return err
	}
	if refs > 1 {
		if root {
			return fmt.Errorf("%w: the root block of tree %d is shared", ErrUnsupported, p.id)
		}
		if n.Owner() == p.id {
			// Other trees reach this block, and what lies below it
			// names this tree in its references: the kernel turns
			// them into references by parent block (FULL_BACKREF)
			// before dropping, which this package does not write yet.
			return fmt.Errorf("%w: subvolume %d owns tree blocks its snapshots share (delete the snapshots first)", ErrUnsupported, p.id)
		}
		p.unref = append(p.unref, treeBlock{e.Bytenr, e.Level})
		return nil
	}
	p.free = append(p.free, treeBlock{e.Bytenr, e.Level})
	p.bytes += uint64(t.fs.sb.NodeSize)
	if !n.IsLeaf() {
		for i := range n.NumItems() {
			kp := n.KeyPtr(i)
			k := kp.Key
			ce := disk.Expect{Bytenr: kp.BlockPtr, Level: n.Level() - 1, Generation: kp.Generation,
				Owner: p.id, OwnerAny: true, FirstKey: &k}
			if err := t.planBlock(p, ce, false); err != nil {
				return err
			}
		}
		return nil
	}
	return leafDataRefs(n, p.id, func(d dataRefChange) error {
		p.data = append(p.data, d)
		return nil
	})
}

// treeBlockRefs returns how many references the tree block at a has,
// pending changes included, and whether one is tree id's own keyed
// reference. Blocks with references other than inline TREE_BLOCK_REFs
// are refused (ErrUnsupported).
func (t *Txn) treeBlockRefs(a disk.LogicalAddr, level int, id disk.ObjectID) (uint64, bool, error) {
	key, it, err := t.treeBlockExtent(a, level)
	if err != nil {
		return 0, false, err
	}
	if !keyedOnly(it) {
		return 0, false, fmt.Errorf("%w: tree block %d (%v) has references other than by root (shared by a parent block)", ErrUnsupported, a, key)
	}
	return it.Refs, hasRef(it, treeRef{disk.TreeBlockRefKey, uint64(id)}), nil
}

// Drop carries out p: the tree's references are dropped (recorded for
// the commit, treerefs.go: the blocks only it referenced lose their last
// one and are freed there, with their extent items), the data references
// of its file extents dropped (extents with none left are freed at the
// commit, with their checksums), and its ROOT_ITEM deleted. It returns
// the tree bytes freed.
func (t *Txn) Drop(p *DropPlan) (uint64, error) {
	mine := treeRef{disk.TreeBlockRefKey, uint64(p.id)}
	for _, b := range p.unref {
		t.addTreeRef(b.addr, b.level, mine, -1)
	}
	for _, b := range p.free {
		t.addTreeRef(b.addr, b.level, mine, -1)
	}
	for _, d := range p.data {
		if err := t.DropDataRef(d.bytenr, d.numBytes, p.id, d.ino, d.offset, 1); err != nil {
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
