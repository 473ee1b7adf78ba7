package btrfs

import (
	"crypto/rand"
	"errors"
	"strings"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// SubvolumeOptions tune CreateSubvolume. The zero value makes a subvolume
// with a random UUID, stamped with the current time.
type SubvolumeOptions struct {
	// UUID of the new subvolume; all zero means random. Reproducible
	// image builds derive it from their input.
	UUID [16]byte
	// Time is the creation time of the subvolume and its root directory;
	// zero means now.
	Time time.Time
}

// CreateSubvolume makes an empty subvolume called name (like `btrfs
// subvolume create`) and returns its id. Its root directory is inode 256,
// mode 0755, owned by root. The parent may be a directory of any
// subvolume; EEXIST, ENOENT, ENOTDIR and ENAMETOOLONG come as
// *fs.PathError and change nothing. opts may be nil.
func (fsys *FS) CreateSubvolume(name string, opts *SubvolumeOptions) (uint64, error) {
	var o SubvolumeOptions
	if opts != nil {
		o = *opts
	}
	if o.Time.IsZero() {
		o.Time = fsys.now()
	}
	if o.UUID == ([16]byte{}) {
		if _, err := rand.Read(o.UUID[:]); err != nil {
			return 0, err
		}
	}
	var id disk.ObjectID
	err := fsys.change("subvolume create", name, func(c *wctx) (bool, error) {
		parent, base, err := c.newSubvolPlace(name)
		if err != nil {
			return false, err
		}
		if id, err = c.newSubvolID(); err != nil {
			return false, err
		}
		index, err := c.nextIndex(parent.ino)
		if err != nil {
			return false, err
		}
		return true, c.createSubvol(parent, base, id, index, o)
	})
	return uint64(id), err
}

// newSubvolID is the highest object id of the subvolume range in the root
// tree plus one (at least 256), as the kernel picks it.
func (c *wctx) newSubvolID() (disk.ObjectID, error) {
	rt, err := c.t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return 0, err
	}
	var p ctree.Path
	defer p.Release()
	if _, err := rt.Search(c.tx, &p, disk.Key{ObjectID: disk.LastFreeObjectID + 1}, 0, false); err != nil {
		return 0, err
	}
	id := disk.FirstFreeObjectID
	if ok, err := rt.Prev(c.tx, &p); err != nil {
		return 0, err
	} else if ok && p.Key().ObjectID >= id && p.Key().ObjectID <= disk.LastFreeObjectID {
		id = p.Key().ObjectID + 1
	}
	if id > disk.LastFreeObjectID {
		return 0, syscall.ENOSPC
	}
	// The id may be a deleted subvolume's (the highest one's): what the
	// writer counted for that tree must not carry over to the new one.
	c.cache.forgetTree(id)
	return id, nil
}

// createSubvol writes the new tree with its root directory, its ROOT_ITEM,
// ROOT_REF and ROOT_BACKREF, the UUID-tree entry, and the entry in parent.
func (c *wctx) createSubvol(parent *winode, base string, id disk.ObjectID, index uint64, o SubvolumeOptions) error {
	ns := uint64(c.tx.Store().Params().NodeSize)
	ts := disk.TimespecOf(o.Time)
	item := disk.RootItem{
		// ROOT_ITEM_INIT as the kernel sets it: without it the kernel
		// clears the root's flags (read-only) when it loads the root.
		Inode: disk.InodeItem{Generation: 1, Size: 3, NLink: 1, NBytes: ns, Mode: disk.ModeDir | 0o755,
			Flags: disk.InodeRootItemInit},
		RootDirID: disk.FirstFreeObjectID, BytesUsed: ns, Refs: 1, UUID: disk.UUID(o.UUID),
		CTransID: c.gen, OTransID: c.gen, CTime: ts, OTime: ts,
	}
	tr, err := c.t.CreateTree(id, item)
	if err != nil {
		return err
	}
	dir := disk.InodeItem{Generation: c.gen, TransID: c.gen, NLink: 1, Mode: disk.ModeDir | 0o755,
		ATime: ts, CTime: ts, MTime: ts, OTime: ts, Sequence: 1}
	buf := make([]byte, disk.InodeItemSize)
	dir.Encode(buf)
	if err := tr.InsertItem(c.tx, disk.Key{ObjectID: disk.FirstFreeObjectID, Type: disk.InodeItemKey}, buf); err != nil {
		return err
	}
	refs := []disk.InodeRef{{Index: 0, Name: []byte("..")}}
	rbuf := make([]byte, disk.InodeRefsSize(refs))
	disk.EncodeInodeRefs(rbuf, refs)
	rk := disk.Key{ObjectID: disk.FirstFreeObjectID, Type: disk.InodeRefKey, Offset: uint64(disk.FirstFreeObjectID)}
	if err := tr.InsertItem(c.tx, rk, rbuf); err != nil {
		return err
	}
	if err := c.subvolRefs(parent, base, id, index); err != nil {
		return err
	}
	if err := c.addUUID(disk.UUID(o.UUID), id); err != nil {
		return err
	}
	return c.addSubvolEntry(parent, base, disk.Key{ObjectID: id, Type: disk.RootItemKey}, index, o.Time)
}

// newSubvolPlace resolves where a new subvolume or snapshot called name
// goes, refusing what cannot take it (a full or pinned directory, a NUL in
// the name, an existing entry). It changes nothing.
func (c *wctx) newSubvolPlace(name string) (*winode, string, error) {
	parent, base, err := c.splitParent(name)
	if err == nil {
		err = canAddEntry(parent)
	}
	if err != nil {
		return nil, "", err
	}
	if strings.IndexByte(base, 0) >= 0 {
		return nil, "", syscall.EINVAL
	}
	de, err := c.dirEntry(parent.ino, base)
	if err == nil && de != nil {
		err = syscall.EEXIST
	}
	return parent, base, err
}

// addSubvolEntry adds the directory entry base in parent that names a
// subvolume's root at loc (offset 0 for a subvolume, -1 for a snapshot, as
// the kernel writes them): DIR_ITEM, DIR_INDEX index, the parent's size
// and times.
func (c *wctx) addSubvolEntry(parent *winode, base string, loc disk.Key, index uint64, now time.Time) error {
	entry := disk.DirItem{Location: loc, TransID: c.gen, Type: disk.FtDir, Name: []byte(base)}
	if err := c.addHashed(disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash(entry.Name)}, entry); err != nil {
		return err
	}
	xbuf := make([]byte, entry.Size())
	disk.EncodeDirItems(xbuf, []disk.DirItem{entry})
	if err := c.tr.InsertItem(c.tx, disk.Key{ObjectID: parent.ino, Type: disk.DirIndexKey, Offset: index}, xbuf); err != nil {
		return err
	}
	parent.item.Size += 2 * uint64(len(base))
	c.touch(parent, now, true)
	return c.putInode(parent)
}

// subvolRefs inserts ROOT_REF (parent subvolume -> id) and ROOT_BACKREF
// (id -> parent subvolume) into the root tree.
func (c *wctx) subvolRefs(parent *winode, base string, id disk.ObjectID, index uint64) error {
	rt, err := c.t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	ref := disk.RootRef{DirID: parent.ino, Sequence: index, Name: []byte(base)}
	buf := make([]byte, ref.Size())
	ref.Encode(buf)
	owner := c.tr.Owner()
	if err := rt.InsertItem(c.tx, disk.Key{ObjectID: owner, Type: disk.RootRefKey, Offset: uint64(id)}, buf); err != nil {
		return err
	}
	return rt.InsertItem(c.tx, disk.Key{ObjectID: id, Type: disk.RootBackrefKey, Offset: uint64(owner)}, buf)
}

// addUUID records id under u in the UUID tree, when the filesystem has one
// (without it the kernel builds the tree at its next read-write mount).
func (c *wctx) addUUID(u disk.UUID, id disk.ObjectID) error {
	return c.addUUIDKind(u, disk.UUIDKeySubvol, id)
}

// addUUIDKind records id under u in the UUID tree with key type kind
// (UUIDKeySubvol, UUIDKeyReceivedSubvol).
func (c *wctx) addUUIDKind(u disk.UUID, kind disk.KeyType, id disk.ObjectID) error {
	ut, err := c.t.Tree(disk.UUIDTreeObjectID)
	if err != nil {
		if errors.Is(err, txn.ErrNoTree) {
			return nil
		}
		return err
	}
	k := disk.UUIDKey(u, kind)
	add := disk.UUIDItem{id}
	buf := make([]byte, add.Size())
	add.Encode(buf)
	err = ut.InsertItem(c.tx, k, buf)
	if !errors.Is(err, ctree.ErrExist) {
		return err
	}
	return ut.ExtendItem(c.tx, k, len(buf), func(data []byte) {
		copy(data[len(data)-len(buf):], buf)
	})
}
