package btrfs

import (
	"bytes"
	"errors"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// winode is an inode loaded inside the running transaction.
type winode struct {
	ino  disk.ObjectID
	item disk.InodeItem
}

// inode reads the INODE_ITEM of ino from the transaction's tree.
func (c *wctx) inode(ino disk.ObjectID) (*winode, error) {
	k := disk.Key{ObjectID: ino, Type: disk.InodeItemKey}
	data, ok, err := c.tr.Lookup(c.tx, k)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "inode item missing"}
	}
	in := &winode{ino: ino}
	if err := in.item.Decode(data); err != nil {
		return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "inode item", Err: err}
	}
	return in, nil
}

// putInode rewrites the INODE_ITEM of in (its size never changes).
func (c *wctx) putInode(in *winode) error {
	k := disk.Key{ObjectID: in.ino, Type: disk.InodeItemKey}
	return c.tr.UpdateItem(c.tx, k, func(data []byte) error {
		if len(data) < disk.InodeItemSize {
			return &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "inode item too short"}
		}
		in.item.Encode(data)
		return nil
	})
}

// dirEntry finds name in directory dir: the DIR_ITEM entry, or nil.
func (c *wctx) dirEntry(dir disk.ObjectID, name string) (*disk.DirItem, error) {
	k := disk.Key{ObjectID: dir, Type: disk.DirItemKey, Offset: disk.NameHash([]byte(name))}
	data, ok, err := c.tr.Lookup(c.tx, k)
	if err != nil || !ok {
		return nil, err
	}
	items, err := disk.ParseDirItems(data)
	if err != nil {
		return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir item", Err: err}
	}
	for i := range items {
		if string(items[i].Name) == name {
			return &items[i], nil
		}
	}
	return nil, nil
}

// resolve walks the components of an io/fs path from the subvolume's root
// directory, without following symlinks (a symlink in the middle is
// ENOTDIR here). A subvolume boundary is EXDEV: only the top-level
// subvolume is writable yet.
func (c *wctx) resolve(name string) (*winode, error) {
	cur, err := c.inode(c.rootDir)
	if err != nil {
		return nil, err
	}
	if name == "." {
		return cur, nil
	}
	for _, comp := range splitPath(name) {
		if !cur.item.IsDir() {
			return nil, syscall.ENOTDIR
		}
		de, err := c.dirEntry(cur.ino, comp)
		if err != nil {
			return nil, err
		}
		if de == nil {
			return nil, syscall.ENOENT
		}
		if de.Location.Type != disk.InodeItemKey {
			return nil, syscall.EXDEV
		}
		if cur, err = c.inode(de.Location.ObjectID); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// splitParent resolves the directory holding the last component of name
// and checks the component's length. name must not be ".".
func (c *wctx) splitParent(name string) (*winode, string, error) {
	if name == "." {
		return nil, "", syscall.EEXIST
	}
	dir, base := ".", name
	if i := lastSlash(name); i >= 0 {
		dir, base = name[:i], name[i+1:]
	}
	if len(base) > disk.NameMax {
		return nil, "", syscall.ENAMETOOLONG
	}
	parent, err := c.resolve(dir)
	if err != nil {
		return nil, "", err
	}
	if !parent.item.IsDir() {
		return nil, "", syscall.ENOTDIR
	}
	return parent, base, nil
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// lastKeyBelow returns the key of the last item before k, if any.
func (c *wctx) lastKeyBelow(k disk.Key) (disk.Key, bool, error) {
	var p ctree.Path
	defer p.Release()
	if _, err := c.tr.Search(c.tx, &p, k, 0, false); err != nil {
		return disk.Key{}, false, err
	}
	ok, err := c.tr.Prev(c.tx, &p)
	if err != nil || !ok {
		return disk.Key{}, false, err
	}
	return p.Key(), true, nil
}

// newIno is the highest objectid used in the subvolume tree plus one.
func (c *wctx) newIno() (disk.ObjectID, error) {
	k, ok, err := c.lastKeyBelow(disk.Key{ObjectID: disk.LastFreeObjectID})
	if err != nil {
		return 0, err
	}
	ino := disk.FirstFreeObjectID
	if ok && k.ObjectID >= ino {
		ino = k.ObjectID + 1
	}
	if ino > disk.LastFreeObjectID-1 {
		return 0, syscall.ENOSPC
	}
	return ino, nil
}

// nextIndex is the DIR_INDEX offset for a new entry of dir: the highest
// existing one plus one, from 2 (0 and 1 stand for "." and "..").
func (c *wctx) nextIndex(dir disk.ObjectID) (uint64, error) {
	k, ok, err := c.lastKeyBelow(disk.Key{ObjectID: dir, Type: disk.DirIndexKey + 1})
	if err != nil {
		return 0, err
	}
	if ok && k.ObjectID == dir && k.Type == disk.DirIndexKey && k.Offset >= 2 {
		return k.Offset + 1, nil
	}
	return 2, nil
}

// addHashed adds entry to the hashed item key (DIR_ITEM or XATTR_ITEM),
// growing the item when names collide.
func (c *wctx) addHashed(k disk.Key, entry disk.DirItem) error {
	buf := make([]byte, entry.Size())
	disk.EncodeDirItems(buf, []disk.DirItem{entry})
	err := c.tr.InsertItem(c.tx, k, buf)
	if !errors.Is(err, ctree.ErrExist) {
		return err
	}
	return c.tr.ExtendItem(c.tx, k, len(buf), func(data []byte) {
		copy(data[len(data)-len(buf):], buf)
	})
}

// removeHashed removes the entry called name from the hashed item key;
// the item goes when it was the last entry.
func (c *wctx) removeHashed(k disk.Key, name []byte) error {
	data, ok, err := c.tr.Lookup(c.tx, k)
	if err != nil {
		return err
	}
	if !ok {
		return &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "hashed item missing"}
	}
	items, err := disk.ParseDirItems(data)
	if err != nil {
		return &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir item", Err: err}
	}
	keep := items[:0]
	for _, it := range items {
		if !bytes.Equal(it.Name, name) {
			keep = append(keep, it)
		}
	}
	return c.replaceItem(k, keep)
}

// replaceItem rewrites the hashed item k with entries (none: deleted).
func (c *wctx) replaceItem(k disk.Key, entries []disk.DirItem) error {
	if _, err := c.tr.DeleteItem(c.tx, k); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	buf := make([]byte, disk.DirItemsSize(entries))
	disk.EncodeDirItems(buf, entries)
	return c.tr.InsertItem(c.tx, k, buf)
}

// touch sets ctime (and mtime when both) to now and the inode's transid.
func (c *wctx) touch(in *winode, now time.Time, mtime bool) {
	ts := disk.TimespecOf(now)
	in.item.CTime = ts
	if mtime {
		in.item.MTime = ts
	}
	in.item.TransID = c.gen
	in.item.Sequence++
}
