package txn

import (
	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// fstState is what the free-space tree holds for one group now.
type fstState struct {
	info    disk.FreeSpaceInfo
	hasInfo bool
	bitmaps bool
	free    alloc.Extents
}

// settleFST makes the free-space tree entry of every touched group equal
// alloc's FreeSpaceTreeView. A group already right is left alone (so a
// pass that changes nothing allocates nothing); otherwise its EXTENT and
// BITMAP items are replaced by one FREE_SPACE_EXTENT per free run and its
// FREE_SPACE_INFO says extent form with the new count. Extent form is
// always valid; the kernel converts to bitmaps itself when it likes.
func (t *Txn) settleFST() error {
	if !t.fs.hasFST {
		return nil
	}
	ft, err := t.Tree(disk.FreeSpaceTreeObjectID)
	if err != nil {
		return err
	}
	for _, s := range t.touchedGroups() {
		g := t.fs.space.Group(s)
		want := t.fs.space.FreeSpaceTreeView(g)
		cur, err := t.readFST(ft, g)
		if err != nil {
			return err
		}
		if !cur.hasInfo {
			return disk.Corruptf("free space tree: no FREE_SPACE_INFO for block group %d", g.Start)
		}
		if !cur.bitmaps && cur.info.Flags == 0 && cur.info.ExtentCount == uint32(want.Len()) && cur.free.Equal(&want) {
			continue
		}
		if err := t.rewriteFST(ft, g, &want); err != nil {
			return err
		}
	}
	return nil
}

// groupFSTRange is the key range of a group's EXTENT and BITMAP items.
func groupFSTRange(g *alloc.BlockGroup) (start, end disk.Key) {
	return disk.Key{ObjectID: disk.ObjectID(g.Start), Type: disk.FreeSpaceExtentKey},
		disk.Key{ObjectID: disk.ObjectID(g.End() - 1), Type: 0xff, Offset: ^uint64(0)}
}

// infoKey is the FREE_SPACE_INFO key of g.
func infoKey(g *alloc.BlockGroup) disk.Key {
	return disk.Key{ObjectID: disk.ObjectID(g.Start), Type: disk.FreeSpaceInfoKey, Offset: g.Length}
}

// readFST decodes the current free-space tree entry of g. Bitmap items
// are only noted (the entry is then rewritten in extent form).
func (t *Txn) readFST(ft *ctree.Tree, g *alloc.BlockGroup) (*fstState, error) {
	st := &fstState{}
	data, found, err := ft.Lookup(t.tx, infoKey(g))
	if err != nil || !found {
		return st, err
	}
	st.hasInfo = true
	if err := st.info.Decode(data); err != nil {
		k := infoKey(g)
		return nil, &disk.CorruptError{Tree: disk.FreeSpaceTreeObjectID, Key: &k, What: "free space info", Err: err}
	}
	start, end := groupFSTRange(g)
	err = ft.Range(t.tx, start, end, func(k disk.Key, _ []byte) (bool, error) {
		switch k.Type {
		case disk.FreeSpaceExtentKey:
			st.free.Insert(uint64(k.ObjectID), uint64(k.ObjectID)+k.Offset)
		case disk.FreeSpaceBitmapKey:
			st.bitmaps = true
		}
		return true, nil
	})
	return st, err
}

// rewriteFST replaces g's entry by the extent form of want.
func (t *Txn) rewriteFST(ft *ctree.Tree, g *alloc.BlockGroup, want *alloc.Extents) error {
	start, end := groupFSTRange(g)
	if _, err := ft.DeleteRange(t.tx, start, end); err != nil {
		return err
	}
	for r := range want.All() {
		k := disk.Key{ObjectID: disk.ObjectID(r.Start), Type: disk.FreeSpaceExtentKey, Offset: r.End - r.Start}
		if err := ft.InsertItem(t.tx, k, nil); err != nil {
			return err
		}
	}
	n := uint32(want.Len())
	return ft.UpdateItem(t.tx, infoKey(g), func(b []byte) error {
		info := disk.FreeSpaceInfo{ExtentCount: n}
		info.Encode(b)
		return nil
	})
}
