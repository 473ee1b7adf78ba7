package btrfs

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Renames and removals of subvolume links (docs/design/0023, "Renaming
// and removing subvolumes"). A subvolume is linked into a directory of
// its parent subvolume by a DIR_ITEM and a DIR_INDEX naming its
// ROOT_ITEM, and by the ROOT_REF (parent -> subvolume) and ROOT_BACKREF
// (subvolume -> parent) of the root tree, which repeat the directory,
// the DIR_INDEX (sequence) and the name. Moving the link rewrites those
// four; nothing in the subvolume's own tree changes, as on Linux.

// subvolLink is a live link of a subvolume: the directory entry whose
// ROOT_REF names the same directory and name.
type subvolLink struct {
	id  disk.ObjectID
	loc disk.Key     // the subvolume's ROOT_ITEM key, as a new entry names it
	ref disk.RootRef // where the link is now (ref.Sequence: its DIR_INDEX)
}

// linkOf returns the live link of the subvolume entry de, base in parent
// (a ROOT_ITEM location), or nil for an entry no ROOT_REF backs: the
// placeholder a snapshot keeps for a subvolume nested in its source.
// c.tr must be parent's tree.
func (c *wctx) linkOf(parent *winode, base string, de *disk.DirItem) (*subvolLink, error) {
	rt, err := c.t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return nil, err
	}
	id := de.Location.ObjectID
	k := disk.Key{ObjectID: parent.tr.Owner(), Type: disk.RootRefKey, Offset: uint64(id)}
	data, found, err := rt.Lookup(c.tx, k)
	if err != nil || !found {
		return nil, err
	}
	l := &subvolLink{id: id}
	if err := l.ref.Decode(data); err != nil {
		return nil, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &k, What: "root ref", Err: err}
	}
	if l.ref.DirID != parent.ino || !bytes.Equal(l.ref.Name, []byte(base)) {
		return nil, nil
	}
	// The kernel's new entry names the ROOT_ITEM by its key: offset 0 for
	// a subvolume, the transid of a snapshot.
	found = false
	err = rt.Range(c.tx, disk.Key{ObjectID: id, Type: disk.RootItemKey}, disk.Key{ObjectID: id, Type: disk.RootItemKey, Offset: ^uint64(0)},
		func(rk disk.Key, _ []byte) (bool, error) {
			l.loc, found = rk, true
			return false, nil
		})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &k, What: "root ref without root item"}
	}
	return l, nil
}

// cmpErr is err when set, else def.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// subvolRoot reads the root directory of subvolume id (to see its flags
// and size), leaving the current tree as it was.
func (c *wctx) subvolRoot(id disk.ObjectID) (*winode, error) {
	tr, err := c.t.Tree(id)
	if err != nil {
		return nil, err
	}
	save := c.tr
	defer func() { c.tr = save }()
	c.tr = tr
	return c.inode(disk.FirstFreeObjectID)
}

// treeUnder reports whether subvolume tree t is subvolume id or lies
// below it, following the ROOT_BACKREFs of the root tree up to the top
// level (a subvolume has one link).
func (c *wctx) treeUnder(t, id disk.ObjectID) (bool, error) {
	rt, err := c.t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return false, err
	}
	for range pathMax {
		if t == id {
			return true, nil
		}
		if t == disk.FSTreeObjectID {
			return false, nil
		}
		parent, found := disk.ObjectID(0), false
		err := rt.Range(c.tx, disk.Key{ObjectID: t, Type: disk.RootBackrefKey},
			disk.Key{ObjectID: t, Type: disk.RootBackrefKey, Offset: ^uint64(0)},
			func(k disk.Key, _ []byte) (bool, error) {
				parent, found = disk.ObjectID(k.Offset), true
				return false, nil
			})
		if err != nil || !found {
			return false, err
		}
		t = parent
	}
	return false, &disk.CorruptError{Tree: disk.RootTreeObjectID, What: fmt.Sprintf("subvolume %d: parents loop", t)}
}

// dropSubvolName removes the link l, base in parent: DIR_ITEM, DIR_INDEX,
// ROOT_REF and ROOT_BACKREF, and the name from the parent's size. c.tr
// must be parent's tree.
func (c *wctx) dropSubvolName(parent *winode, base string, l *subvolLink) error {
	c.cache.mu.Lock()
	clear(c.cache.dirs)
	c.cache.mu.Unlock()
	name := []byte(base)
	if err := c.removeHashed(disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash(name)}, name); err != nil {
		return err
	}
	if _, err := c.tr.DeleteItem(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: l.ref.Sequence}); err != nil {
		return err
	}
	if err := c.dropSubvolRefs(parent.tr.Owner(), l.id); err != nil {
		return err
	}
	parent.item.Size -= 2 * uint64(len(base))
	return nil
}

// dropSubvolRefs removes the ROOT_REF (owner -> id) and ROOT_BACKREF (id
// -> owner) of subvolume id, linked in subvolume owner.
func (c *wctx) dropSubvolRefs(owner, id disk.ObjectID) error {
	rt, err := c.t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	if _, err := rt.DeleteItem(c.tx, disk.Key{ObjectID: owner, Type: disk.RootRefKey, Offset: uint64(id)}); err != nil {
		return err
	}
	_, err = rt.DeleteItem(c.tx, disk.Key{ObjectID: id, Type: disk.RootBackrefKey, Offset: uint64(owner)})
	return err
}

// addSubvolName links subvolume l as base in parent with DIR_INDEX index:
// ROOT_REF and ROOT_BACKREF, DIR_ITEM and DIR_INDEX, the parent's size.
// The caller updates and writes the parent's times. c.tr must be
// parent's tree.
func (c *wctx) addSubvolName(parent *winode, base string, l *subvolLink, index uint64) error {
	if err := c.subvolRefs(parent, base, l.id, index); err != nil {
		return err
	}
	entry := disk.DirItem{Location: l.loc, TransID: c.gen, Type: disk.FtDir, Name: []byte(base)}
	if err := c.addHashed(disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash(entry.Name)}, entry); err != nil {
		return err
	}
	xbuf := make([]byte, entry.Size())
	disk.EncodeDirItems(xbuf, []disk.DirItem{entry})
	if err := c.tr.InsertItem(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: index}, xbuf); err != nil {
		return err
	}
	parent.item.Size += 2 * uint64(len(base))
	return nil
}

// planSubvolRename is planRename for a source that is a subvolume entry
// de: it may move to a directory of any subvolume (Linux moves subvolume
// links between subvolumes), not into itself (EINVAL); a target that
// exists must be an empty directory (a subvolume is ENOTEMPTY, as the
// kernel refuses to replace one). A placeholder is EXDEV, as on Linux.
func (c *wctx) planSubvolRename(r *renameOp, de *disk.DirItem) (*renameOp, error) {
	c.tr = r.oldParent.tr
	l, err := c.linkOf(r.oldParent, r.oldBase, de)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, syscall.EXDEV
	}
	r.link = l
	if len(r.newBase) > disk.NameMax {
		return nil, syscall.ENAMETOOLONG
	}
	if under, err := c.treeUnder(r.newParent.tr.Owner(), l.id); err != nil || under {
		return nil, cmpErr(err, syscall.EINVAL)
	}
	c.tr = r.newParent.tr
	te, err := c.dirEntry(r.newParent.ino, r.newBase)
	if err != nil {
		return nil, err
	}
	if te != nil {
		switch {
		case te.Location.Type == disk.RootItemKey && te.Location.ObjectID == l.id && r.newParent == r.oldParent:
			return nil, nil // the same link
		case te.Type != disk.FtDir:
			return nil, syscall.ENOTDIR
		case te.Location.Type == disk.RootItemKey:
			if r.holderIndex, err = c.planReplaceEntry(r.newParent, r.newBase, te, true); err != nil {
				return nil, err
			}
			r.holder = true
		case te.Location.Type != disk.InodeItemKey:
			return nil, syscall.EXDEV
		}
	}
	if te != nil && !r.holder {
		if r.dst, err = c.inode(te.Location.ObjectID); err != nil {
			return nil, err
		}
		if !r.dst.item.IsDir() {
			return nil, syscall.ENOTDIR
		}
		if err := c.checkRemovable(r.dst); err != nil {
			return nil, err
		}
		if r.dstRef, err = c.findBackref(r.dst.ino, r.newParent.ino, []byte(r.newBase)); err != nil {
			return nil, err
		}
		if err := c.checkDirSize(r.newParent, r.newBase); err != nil {
			return nil, err
		}
	}
	root, err := c.subvolRoot(l.id)
	if err != nil {
		return nil, err
	}
	if err := notPinned(root); err != nil {
		return nil, err
	}
	if err := notPinned(r.oldParent); err != nil {
		return nil, err
	}
	if err := canAddEntry(r.newParent); err != nil {
		return nil, err
	}
	c.tr = r.oldParent.tr
	if err := c.checkDirSize(r.oldParent, r.oldBase); err != nil {
		return nil, err
	}
	c.tr = r.newParent.tr
	if r.index, err = c.nextIndex(r.newParent.ino); err != nil {
		return nil, err
	}
	return r, nil
}

// renameSubvol runs a planned rename of a subvolume link: the replaced
// empty directory goes, the link moves, both parents get new times. The
// subvolume's root directory is not written, as the kernel leaves it.
func (c *wctx) renameSubvol(r *renameOp) error {
	now := c.now()
	c.tr = r.newParent.tr
	if err := c.dropTarget(r, now); err != nil {
		return err
	}
	c.tr = r.oldParent.tr
	if err := c.dropSubvolName(r.oldParent, r.oldBase, r.link); err != nil {
		return err
	}
	if r.newParent != r.oldParent {
		c.touch(r.oldParent, now, true)
		if err := c.putInode(r.oldParent); err != nil {
			return err
		}
	}
	c.tr = r.newParent.tr
	if err := c.addSubvolName(r.newParent, r.newBase, r.link, r.index); err != nil {
		return err
	}
	c.touch(r.newParent, now, true)
	return c.putInode(r.newParent)
}

// removeSubvolEntry is Remove of the subvolume entry de, base in parent
// (c.tr is parent's tree), as the kernel's rmdir: a placeholder entry
// goes; a subvolume whose root directory is empty is deleted
// (deleteSubvol), in this change, so nothing can fill it between the
// check and the deletion; one with entries is ENOTEMPTY.
func (c *wctx) removeSubvolEntry(parent *winode, base string, de *disk.DirItem) (bool, error) {
	if err := notPinned(parent); err != nil {
		return false, err
	}
	l, err := c.linkOf(parent, base, de)
	if err != nil {
		return false, err
	}
	if l != nil {
		root, err := c.subvolRoot(l.id)
		if err != nil {
			return false, err
		}
		if root.item.Size != 0 {
			return false, syscall.ENOTEMPTY
		}
		if err := c.checkDeletable(l.id); err != nil {
			// The kernel's rmdir says only EPERM (the default one).
			var en syscall.Errno
			if errors.As(err, &en) {
				return false, en
			}
			return false, err
		}
		if h := c.fsys.w.rmdirHook; h != nil {
			h()
		}
		return c.deleteSubvol(parent, base, l)
	}
	index, err := c.placeholderIndex(parent, base, de)
	if err != nil {
		return false, err
	}
	if err := c.dropPlaceholder(parent, base, index); err != nil {
		return true, err
	}
	c.touch(parent, c.now(), true)
	return true, c.putInode(parent)
}

// placeholderIndex finds the DIR_INDEX of the placeholder entry de, base
// in parent (c.tr is parent's tree), and checks that it can go.
func (c *wctx) placeholderIndex(parent *winode, base string, de *disk.DirItem) (uint64, error) {
	index, found := uint64(0), false
	err := c.tr.Range(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey},
		disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: ^uint64(0)},
		func(k disk.Key, data []byte) (bool, error) {
			items, err := disk.ParseDirItems(data)
			if err != nil || len(items) != 1 {
				return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir index", Err: err}
			}
			if string(items[0].Name) == base && items[0].Location == de.Location {
				index, found = k.Offset, true
				return false, nil
			}
			return true, nil
		})
	if err != nil {
		return 0, err
	}
	if !found {
		k := disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash([]byte(base))}
		return 0, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "directory entry without its index"}
	}
	return index, c.checkDirSize(parent, base)
}

// dropPlaceholder removes the placeholder entry base (DIR_INDEX index)
// from parent: its DIR_ITEM, DIR_INDEX and the name from the parent's
// size. c.tr must be parent's tree.
func (c *wctx) dropPlaceholder(parent *winode, base string, index uint64) error {
	c.cache.mu.Lock()
	clear(c.cache.dirs)
	c.cache.mu.Unlock()
	name := []byte(base)
	if err := c.removeHashed(disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash(name)}, name); err != nil {
		return err
	}
	if _, err := c.tr.DeleteItem(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: index}); err != nil {
		return err
	}
	parent.item.Size -= 2 * uint64(len(base))
	return nil
}

// planReplaceEntry checks a rename target te, base in parent (c.tr is
// parent's tree), that names a subvolume or a placeholder, for a source
// that is a directory (srcDir) or not: a subvolume is never replaced
// (ENOTEMPTY; EISDIR for a file), a placeholder is, by a directory, as
// the kernel does. It returns the placeholder's DIR_INDEX.
func (c *wctx) planReplaceEntry(parent *winode, base string, te *disk.DirItem, srcDir bool) (uint64, error) {
	l, err := c.linkOf(parent, base, te)
	switch {
	case err != nil:
		return 0, err
	case !srcDir:
		return 0, syscall.EISDIR
	case l != nil:
		return 0, syscall.ENOTEMPTY
	}
	return c.placeholderIndex(parent, base, te)
}

// planExchangeLinks finishes planExchange when a side is a subvolume
// link: neither side may hold the other's directory (EINVAL), flags may
// pin neither, and each side gets its DIR_INDEX under its new name.
func (c *wctx) planExchangeLinks(x *exchangeOp, extref bool) error {
	for i := range 2 {
		o := 1 - i
		var under bool
		var err error
		if x.link[i] != nil {
			under, err = c.treeUnder(x.parent[o].tr.Owner(), x.link[i].id)
		} else if x.in[i].item.IsDir() {
			c.tr = x.parent[i].tr // both sides are in one tree
			under, err = c.dirUnder(x.parent[o].ino, x.in[i].ino)
		}
		if err != nil || under {
			return cmpErr(err, syscall.EINVAL)
		}
	}
	for i := range 2 {
		in := x.in[i]
		if x.link[i] != nil {
			var err error
			if in, err = c.subvolRoot(x.link[i].id); err != nil {
				return err
			}
		}
		if err := notPinned(in); err != nil {
			return err
		}
		if err := notPinned(x.parent[i]); err != nil {
			return err
		}
		c.tr = x.parent[i].tr
		if x.in[i] != nil {
			var err error
			if x.ref[i], err = c.findBackref(x.in[i].ino, x.parent[i].ino, []byte(x.base[i])); err != nil {
				return err
			}
		}
		if err := c.checkDirSize(x.parent[i], x.base[i]); err != nil {
			return err
		}
	}
	for i := range 2 {
		o := 1 - i
		c.tr = x.parent[o].tr
		if x.in[i] != nil {
			freed := 0
			if x.parent[o] == x.parent[i] && !x.ref[i].extref() {
				freed = disk.InodeRefBaseSize + len(x.base[i])
			}
			var err error
			if x.newRef[i], err = c.planBackref(x.in[i].ino, x.parent[o].ino, []byte(x.base[o]), extref, freed); err != nil {
				return err
			}
		}
		var err error
		if x.index[i], err = c.nextIndex(x.parent[o].ino); err != nil {
			return err
		}
	}
	return nil
}

// exchangeLinks runs a planned exchange with a subvolume link on one side
// or both: both names go, then each comes back naming the other side. A
// subvolume's root directory is not written, as the kernel leaves it.
func (c *wctx) exchangeLinks(x *exchangeOp) error {
	now := c.now()
	for i := range 2 {
		c.tr = x.parent[i].tr
		var err error
		if x.link[i] != nil {
			err = c.dropSubvolName(x.parent[i], x.base[i], x.link[i])
		} else {
			err = c.dropName(x.parent[i], x.base[i], x.ref[i])
		}
		if err != nil {
			return err
		}
	}
	for i := range 2 {
		o := 1 - i
		c.tr = x.parent[o].tr
		var err error
		if x.link[i] != nil {
			err = c.addSubvolName(x.parent[o], x.base[o], x.link[i], x.index[i])
		} else {
			err = c.addName(x.parent[o], x.base[o], x.in[i], x.index[i], x.newRef[i])
		}
		if err != nil {
			return err
		}
	}
	for i := range 2 {
		if x.in[i] == nil {
			continue
		}
		c.tr = x.in[i].tr
		c.touch(x.in[i], now, false)
		if err := c.putInode(x.in[i]); err != nil {
			return err
		}
	}
	for i := range 2 {
		if i == 1 && x.parent[1] == x.parent[0] {
			break
		}
		c.tr = x.parent[i].tr
		c.touch(x.parent[i], now, true)
		if err := c.putInode(x.parent[i]); err != nil {
			return err
		}
	}
	return nil
}

// dropTarget takes away what a rename replaces: an inode's name (the
// inode with it at its last link) or a placeholder. c.tr must be the new
// parent's tree.
func (c *wctx) dropTarget(r *renameOp, now time.Time) error {
	switch {
	case r.holder:
		return c.dropPlaceholder(r.newParent, r.newBase, r.holderIndex)
	case r.dst != nil:
		return c.unlink(r.newParent, r.dst, r.newBase, r.dstRef, now)
	}
	return nil
}
