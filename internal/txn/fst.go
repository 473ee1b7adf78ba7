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
// BITMAP items are replaced, in the form the kernel would keep them in
// (fstUseBitmaps), and its FREE_SPACE_INFO gets the new count and flag.
func (t *Txn) settleFST() error {
	if !t.keepsFST() {
		return nil
	}
	ft, err := t.Tree(disk.FreeSpaceTreeObjectID)
	if err != nil {
		return err
	}
	for _, s := range t.touchedGroups() {
		g := t.fs.space.Group(s)
		if err := t.fs.space.LoadGroup(g); err != nil {
			return err
		}
		want := t.fs.space.FreeSpaceTreeView(g)
		cur, err := t.readFST(ft, g)
		if err != nil {
			return err
		}
		if !cur.hasInfo {
			return disk.Corruptf("free space tree: no FREE_SPACE_INFO for block group %d", g.Start)
		}
		bitmaps := t.fstUseBitmaps(g, cur.bitmaps, want.Len())
		if cur.bitmaps == bitmaps && cur.info.ExtentCount == uint32(want.Len()) && cur.free.Equal(&want) {
			continue
		}
		if err := t.rewriteFST(ft, g, &want, bitmaps); err != nil {
			return err
		}
	}
	return nil
}

// fstBitmapBytes is the payload of a full FREE_SPACE_BITMAP item; one item
// covers fstBitmapBytes*8 sectors.
const fstBitmapBytes = 256

// fstItemHeader is the size of a leaf item header, which the kernel's
// thresholds weigh bitmaps against.
const fstItemHeader = disk.KeySize + 8

// fstUseBitmaps decides the form of a group's entry with n free extents,
// as the kernel does: extents turn into bitmaps when n passes the point
// where the bitmaps (items and payload) would take less room than the
// extent items, and bitmaps go back to extents only when n falls 100
// below that point, so a group near the threshold does not flip on every
// commit.
func (t *Txn) fstUseBitmaps(g *alloc.BlockGroup, using bool, n int) bool {
	span := uint64(fstBitmapBytes*8) * uint64(t.fs.sb.SectorSize)
	bitmaps := (g.Length + span - 1) / span
	high := bitmaps * (fstItemHeader + fstBitmapBytes) / fstItemHeader
	low := uint64(0)
	if high > 100 {
		low = high - 100
	}
	if using {
		return uint64(n) >= low
	}
	return uint64(n) > high
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

// readFST decodes the current free-space tree entry of g, in either form.
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
	st.bitmaps = st.info.Flags&disk.FreeSpaceUsingBitmaps != 0
	ss := uint64(t.fs.sb.SectorSize)
	start, end := groupFSTRange(g)
	err = ft.Range(t.tx, start, end, func(k disk.Key, v []byte) (bool, error) {
		switch k.Type {
		case disk.FreeSpaceExtentKey:
			st.free.Insert(uint64(k.ObjectID), uint64(k.ObjectID)+k.Offset)
		case disk.FreeSpaceBitmapKey:
			for i, n := range disk.BitmapRuns(v, k.Offset/ss) {
				s := uint64(k.ObjectID) + i*ss
				st.free.Insert(s, s+n*ss)
			}
		}
		return true, nil
	})
	return st, err
}

// rewriteFST replaces g's entry by want, as bitmaps tiling the group from
// its start or as one FREE_SPACE_EXTENT per free run.
func (t *Txn) rewriteFST(ft *ctree.Tree, g *alloc.BlockGroup, want *alloc.Extents, bitmaps bool) error {
	start, end := groupFSTRange(g)
	if _, err := ft.DeleteRange(t.tx, start, end); err != nil {
		return err
	}
	var err error
	if bitmaps {
		err = t.insertBitmaps(ft, g, want)
	} else {
		for r := range want.All() {
			k := disk.Key{ObjectID: disk.ObjectID(r.Start), Type: disk.FreeSpaceExtentKey, Offset: r.End - r.Start}
			if err = ft.InsertItem(t.tx, k, nil); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	info := disk.FreeSpaceInfo{ExtentCount: uint32(want.Len())}
	if bitmaps {
		info.Flags = disk.FreeSpaceUsingBitmaps
	}
	return ft.UpdateItem(t.tx, infoKey(g), func(b []byte) error {
		info.Encode(b)
		return nil
	})
}

// insertBitmaps writes want as FREE_SPACE_BITMAP items, each covering up
// to fstBitmapBytes*8 sectors of g.
func (t *Txn) insertBitmaps(ft *ctree.Tree, g *alloc.BlockGroup, want *alloc.Extents) error {
	ss := uint64(t.fs.sb.SectorSize)
	span := uint64(fstBitmapBytes*8) * ss
	for s := g.Start; s < g.End(); s += span {
		e := min(s+span, g.End())
		bm := make([]byte, disk.FreeSpaceBitmapSize(e-s, uint32(ss)))
		for r := range want.All() {
			lo, hi := max(r.Start, s), min(r.End, e)
			if lo < hi {
				disk.BitmapSet(bm, (lo-s)/ss, (hi-lo)/ss)
			}
		}
		k := disk.Key{ObjectID: disk.ObjectID(s), Type: disk.FreeSpaceBitmapKey, Offset: e - s}
		if err := ft.InsertItem(t.tx, k, bm); err != nil {
			return err
		}
	}
	return nil
}
