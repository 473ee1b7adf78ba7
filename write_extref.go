package btrfs

import (
	"bytes"
	"errors"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// The back-references of an inode's names. Every name (parent, name,
// index) of an inode is recorded once, in the inode's INODE_REF item for
// that parent, (ino, INODE_REF, parent), where all its names in that
// directory are packed; when that item cannot grow any more and the
// filesystem has EXTENDED_IREF, in an INODE_EXTREF item (ino,
// INODE_EXTREF, ExtrefHash(parent, name)), whose entries are the names
// whose hashes collide. This is where the kernel puts them, and btrfs
// check counts nlink over both kinds.

// backref says where one name of an inode is recorded.
type backref struct {
	key   disk.Key // the INODE_REF or INODE_EXTREF item holding the name
	index uint64   // the name's DIR_INDEX offset in the parent
}

// extref reports whether the name sits in an INODE_EXTREF item.
func (b backref) extref() bool { return b.key.Type == disk.InodeExtrefKey }

// refKey is the INODE_REF item of ino's names in parent.
func refKey(ino, parent disk.ObjectID) disk.Key {
	return disk.Key{ObjectID: ino, Type: disk.InodeRefKey, Offset: uint64(parent)}
}

// extrefKey is the INODE_EXTREF item of ino that would hold name in parent.
func extrefKey(ino, parent disk.ObjectID, name []byte) disk.Key {
	return disk.Key{ObjectID: ino, Type: disk.InodeExtrefKey, Offset: disk.ExtrefHash(parent, name)}
}

// findBackref finds the back-reference of the name of ino in parent. A
// directory entry without one is corruption.
func (c *wctx) findBackref(ino, parent disk.ObjectID, name []byte) (backref, error) {
	rk := refKey(ino, parent)
	data, ok, err := c.tr.Lookup(c.tx, rk)
	if err != nil {
		return backref{}, err
	}
	if ok {
		refs, err := disk.ParseInodeRefs(data)
		if err != nil {
			return backref{}, &disk.CorruptError{Tree: c.tr.Owner(), Key: &rk, What: "inode ref", Err: err}
		}
		for _, r := range refs {
			if bytes.Equal(r.Name, name) {
				return backref{key: rk, index: r.Index}, nil
			}
		}
	}
	xk := extrefKey(ino, parent, name)
	data, ok, err = c.tr.Lookup(c.tx, xk)
	if err != nil {
		return backref{}, err
	}
	if ok {
		refs, err := disk.ParseInodeExtrefs(data)
		if err != nil {
			return backref{}, &disk.CorruptError{Tree: c.tr.Owner(), Key: &xk, What: "inode extref", Err: err}
		}
		for _, r := range refs {
			if r.Parent == parent && bytes.Equal(r.Name, name) {
				return backref{key: xk, index: r.Index}, nil
			}
		}
	}
	return backref{}, &disk.CorruptError{Tree: c.tr.Owner(), Key: &rk,
		What: "directory entry " + quoteName(name) + " has no inode ref or extref"}
}

// quoteName prints a name from disk for an error message.
func quoteName(name []byte) string {
	const max = 64
	if len(name) > max {
		return "\"" + string(name[:max]) + "...\""
	}
	return "\"" + string(name) + "\""
}

// dropBackref removes the name from the item b points at; the item goes
// when it was its last entry.
func (c *wctx) dropBackref(b backref, parent disk.ObjectID, name []byte) error {
	data, ok, err := c.tr.Lookup(c.tx, b.key)
	if err != nil {
		return err
	}
	if !ok {
		return &disk.CorruptError{Tree: c.tr.Owner(), Key: &b.key, What: "back-reference item vanished"}
	}
	var buf []byte
	if b.extref() {
		refs, err := disk.ParseInodeExtrefs(data)
		if err != nil {
			return &disk.CorruptError{Tree: c.tr.Owner(), Key: &b.key, What: "inode extref", Err: err}
		}
		keep := refs[:0]
		for _, r := range refs {
			if !(r.Parent == parent && bytes.Equal(r.Name, name)) {
				keep = append(keep, r)
			}
		}
		if len(keep) > 0 {
			buf = make([]byte, disk.InodeExtrefsSize(keep))
			disk.EncodeInodeExtrefs(buf, keep)
		}
	} else {
		refs, err := disk.ParseInodeRefs(data)
		if err != nil {
			return &disk.CorruptError{Tree: c.tr.Owner(), Key: &b.key, What: "inode ref", Err: err}
		}
		keep := refs[:0]
		for _, r := range refs {
			if !bytes.Equal(r.Name, name) {
				keep = append(keep, r)
			}
		}
		if len(keep) > 0 {
			buf = make([]byte, disk.InodeRefsSize(keep))
			disk.EncodeInodeRefs(buf, keep)
		}
	}
	if _, err := c.tr.DeleteItem(c.tx, b.key); err != nil {
		return err
	}
	if buf == nil {
		return nil
	}
	return c.tr.InsertItem(c.tx, b.key, buf)
}

// planBackref decides which item records a new name of ino in parent, as
// the kernel does: the INODE_REF item for parent while it can grow
// (freed bytes are about to be removed from it first, by a rename inside
// the directory); else, with EXTENDED_IREF (extrefOK), in an INODE_EXTREF
// item; else EMLINK. It changes nothing.
func (c *wctx) planBackref(ino, parent disk.ObjectID, name []byte, extrefOK bool, freed int) (disk.Key, error) {
	max := c.maxItemSize()
	rk := refKey(ino, parent)
	data, ok, err := c.tr.Lookup(c.tx, rk)
	if err != nil {
		return disk.Key{}, err
	}
	entry := disk.InodeRefBaseSize + len(name)
	switch {
	case !ok || len(data)-freed+entry <= max:
		return rk, nil
	case !extrefOK:
		return disk.Key{}, syscall.EMLINK
	}
	xk := extrefKey(ino, parent, name)
	data, ok, err = c.tr.Lookup(c.tx, xk)
	if err != nil {
		return disk.Key{}, err
	}
	if ok && len(data)+disk.InodeExtrefBaseSize+len(name) > max {
		return disk.Key{}, syscall.EMLINK
	}
	return xk, nil
}

// addBackref records the name (parent, name, index) of an inode in the
// item k that planBackref chose: a new item, or the existing one grown.
func (c *wctx) addBackref(k disk.Key, parent disk.ObjectID, name []byte, index uint64) error {
	var buf []byte
	if k.Type == disk.InodeExtrefKey {
		refs := []disk.InodeExtref{{Parent: parent, Index: index, Name: name}}
		buf = make([]byte, disk.InodeExtrefsSize(refs))
		disk.EncodeInodeExtrefs(buf, refs)
	} else {
		refs := []disk.InodeRef{{Index: index, Name: name}}
		buf = make([]byte, disk.InodeRefsSize(refs))
		disk.EncodeInodeRefs(buf, refs)
	}
	err := c.tr.InsertItem(c.tx, k, buf)
	if !errors.Is(err, ctree.ErrExist) {
		return err
	}
	return c.tr.ExtendItem(c.tx, k, len(buf), func(data []byte) {
		copy(data[len(data)-len(buf):], buf)
	})
}
