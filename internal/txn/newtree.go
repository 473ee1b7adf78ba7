package txn

import (
	"errors"
	"fmt"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrNoTree is returned by Tree for a tree the filesystem does not have.
var ErrNoTree = errors.New("txn: no such tree")

// CreateTree makes tree id, empty, in this transaction, and inserts its
// ROOT_ITEM (key id, ROOT_ITEM, 0) into the root tree with item's fields;
// bytenr, level and the generations are kept current by Commit as for
// every opened tree. It is how a new subvolume begins. An id that already
// has a ROOT_ITEM is refused.
func (t *Txn) CreateTree(id disk.ObjectID, item disk.RootItem) (*ctree.Tree, error) {
	rt, err := t.checkNewTree(id)
	if err != nil {
		return nil, err
	}
	tr, err := ctree.Create(t.tx, id, t.fs.treeOptions(id))
	if err != nil {
		return nil, err
	}
	r := tr.Root()
	item.Bytenr, item.Level, item.Generation = r.Addr, uint8(r.Level), r.Generation
	item.Legacy = false
	item.GenerationV2 = r.Generation
	key := disk.Key{ObjectID: id, Type: disk.RootItemKey}
	buf := make([]byte, item.Size())
	item.Encode(buf)
	if err := rt.InsertItem(t.tx, key, buf); err != nil {
		return nil, err
	}
	t.trees[id] = tr
	t.rootKeys[id] = key
	t.setUsedLocked(id, tr, item.BytesUsed)
	return tr, nil
}

// checkNewTree refuses a new subvolume tree id that is outside the
// subvolume range or exists, and returns the running root tree.
func (t *Txn) checkNewTree(id disk.ObjectID) (*ctree.Tree, error) {
	if t.done {
		return nil, fmt.Errorf("txn: transaction %d already ended", t.gen)
	}
	if id < disk.FirstFreeObjectID || id > disk.LastFreeObjectID {
		return nil, fmt.Errorf("%w: new tree id %d outside the subvolume range", ErrUnsupported, id)
	}
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return nil, err
	}
	if t.trees[id] != nil {
		return nil, fmt.Errorf("txn: tree %d exists", id)
	}
	if _, _, err := t.lookupRootItem(rt, id); err == nil {
		return nil, fmt.Errorf("txn: tree %d exists", id)
	}
	return rt, nil
}

// OpenedTrees returns the ids of the trees opened (or created) in this
// transaction so far, in no particular order: the trees whose roots may
// differ from the last commit.
func (t *Txn) OpenedTrees() []disk.ObjectID {
	t.treesMu.Lock()
	defer t.treesMu.Unlock()
	ids := make([]disk.ObjectID, 0, len(t.trees))
	for id := range t.trees {
		ids = append(ids, id)
	}
	return ids
}

// RootItem returns the ROOT_ITEM of tree id as the running transaction
// sees it (any key offset: snapshots key theirs by creation transid).
// Bytenr, level and generation are those of the last update, which Commit
// brings up to date; use Tree(id).Root() for the current root.
func (t *Txn) RootItem(id disk.ObjectID) (*disk.RootItem, error) {
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return nil, err
	}
	ri, _, err := t.lookupRootItem(rt, id)
	return ri, err
}
