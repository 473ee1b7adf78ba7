package btrfs

import (
	"bytes"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// The item model of a subvolume tree, one place for both sides: inode
// items, directory entries and file extents are found, decoded and
// checked here, whether the tree is read as committed (the read side, a
// ctree.Cursor) or as the running transaction holds it (the write side,
// the engine's own locked search). So both sides refuse the same damage
// with the same error.

// itemSource is one subvolume tree to look items up in.
type itemSource interface {
	// tree is the tree's id, for errors.
	tree() disk.ObjectID
	// lookup returns the data of the item with exactly key k.
	lookup(k disk.Key) ([]byte, bool, error)
	// scan calls fn for each item with a key in [from, to], in key order,
	// until fn returns false or an error. leaf is the address of the leaf
	// holding the item when known (0 otherwise), for errors.
	scan(from, to disk.Key, fn func(k disk.Key, data []byte, leaf disk.LogicalAddr) (bool, error)) error
}

// committedItems reads a committed tree through the read side's cursor.
type committedItems struct {
	fsys *FS
	root ctree.Root
	id   disk.ObjectID
}

func (s committedItems) tree() disk.ObjectID { return s.id }

func (s committedItems) lookup(k disk.Key) ([]byte, bool, error) { return s.fsys.lookupItem(s.root, k) }

func (s committedItems) scan(from, to disk.Key, fn func(disk.Key, []byte, disk.LogicalAddr) (bool, error)) error {
	c := s.fsys.cursor(s.root)
	ok, err := c.Seek(from)
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.Compare(to) > 0 {
			return nil
		}
		more, ferr := fn(k, c.Data(), c.Leaf().Bytenr())
		if ferr != nil || !more {
			return ferr
		}
	}
	return err
}

// itemsOf is the committed (or shown) tree of subvolume sv.
func (fsys *FS) itemsOf(sv *subvol) itemSource {
	return committedItems{fsys: fsys, root: sv.root, id: sv.id}
}

// txItems reads the running transaction's version of a tree.
type txItems struct {
	tx *ctree.Trans
	tr *ctree.Tree
}

func (s txItems) tree() disk.ObjectID { return s.tr.Owner() }

func (s txItems) lookup(k disk.Key) ([]byte, bool, error) { return s.tr.Lookup(s.tx, k) }

func (s txItems) scan(from, to disk.Key, fn func(disk.Key, []byte, disk.LogicalAddr) (bool, error)) error {
	return s.tr.Range(s.tx, from, to, func(k disk.Key, data []byte) (bool, error) { return fn(k, data, 0) })
}

// items is the change's current subvolume tree as an itemSource.
func (c *wctx) items() itemSource { return txItems{tx: c.tx, tr: c.tr} }

// findInodeItem decodes the INODE_ITEM of ino (nil, nil when there is
// none).
func findInodeItem(src itemSource, ino disk.ObjectID) (*disk.InodeItem, error) {
	k := disk.Key{ObjectID: ino, Type: disk.InodeItemKey}
	data, ok, err := src.lookup(k)
	if err != nil || !ok {
		return nil, err
	}
	var it disk.InodeItem
	if err := it.Decode(data); err != nil {
		return nil, &disk.CorruptError{Tree: src.tree(), Key: &k, What: "inode item", Err: err}
	}
	return &it, nil
}

// findDirItem finds name in directory dir through its DIR_ITEM hash
// bucket (nil, nil when absent).
func findDirItem(src itemSource, dir disk.ObjectID, name string) (*disk.DirItem, error) {
	k := disk.Key{ObjectID: dir, Type: disk.DirItemKey, Offset: disk.NameHash([]byte(name))}
	data, ok, err := src.lookup(k)
	if err != nil || !ok {
		return nil, err
	}
	items, err := disk.ParseDirItems(data)
	if err != nil {
		return nil, &disk.CorruptError{Tree: src.tree(), Key: &k, What: "dir item", Err: err}
	}
	for i := range items {
		if bytes.Equal(items[i].Name, []byte(name)) {
			return &items[i], nil
		}
	}
	return nil, nil
}

// fileExtentsIn returns the EXTENT_DATA items of ino that overlap [a, b)
// (an inline extent counts from offset 0), in file order, each checked:
// it decodes, its range does not overflow, an inline extent starts at 0,
// and it does not overlap the one before. from is where the scan starts:
// the key of the last extent starting at or before a (found by the
// caller, which knows how to search backwards in its tree), or the
// inode's first EXTENT_DATA key.
func fileExtentsIn(src itemSource, ino disk.ObjectID, from disk.Key, a, b uint64) ([]extent, error) {
	to := disk.Key{ObjectID: ino, Type: disk.ExtentDataKey, Offset: ^uint64(0)}
	var out []extent
	var end uint64
	var derr error
	err := src.scan(from, to, func(k disk.Key, data []byte, leaf disk.LogicalAddr) (bool, error) {
		if k.Offset >= b {
			return false, nil
		}
		e, err := decodeExtent(src.tree(), k, data, leaf)
		if err == nil && e.start < end {
			err = &disk.CorruptError{Logical: leaf, Tree: src.tree(), Key: &k, What: "file extent overlaps the previous one"}
		}
		if err != nil {
			derr = err
			return false, nil
		}
		end = e.start + e.length
		if end > a || (e.fe.Type == disk.FileExtentInline && a == 0) {
			out = append(out, e)
		}
		return true, nil
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// decodeExtent decodes and checks one EXTENT_DATA item.
func decodeExtent(tree disk.ObjectID, k disk.Key, data []byte, leaf disk.LogicalAddr) (extent, error) {
	e := extent{start: k.Offset}
	if err := e.fe.Decode(data); err != nil {
		return e, &disk.CorruptError{Logical: leaf, Tree: tree, Key: &k, What: "file extent", Err: err}
	}
	e.length = e.fe.Len()
	switch {
	case e.start+e.length < e.start:
		return e, &disk.CorruptError{Logical: leaf, Tree: tree, Key: &k, What: "file extent length overflows"}
	case e.fe.Type == disk.FileExtentInline && e.start != 0:
		return e, &disk.CorruptError{Logical: leaf, Tree: tree, Key: &k, What: "inline file extent not at offset 0"}
	}
	return e, nil
}
