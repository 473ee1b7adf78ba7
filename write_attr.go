package btrfs

import (
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// capabilityXattr holds file capabilities; Linux drops it when a file
// changes owner, so that a copied binary does not keep its privileges.
const capabilityXattr = "security.capability"

// Chown sets the owner uid and group gid of name; -1 keeps a value.
// Symlinks are not followed (lchown). As on Linux, also for root, a
// change of owner of anything but a directory clears the set-user-ID
// bit, the set-group-ID bit when the group may execute, and the
// security.capability attribute. The change time becomes now. An id that
// is not -1 and does not fit 32 bits, or is 4294967295, is EINVAL.
func (fsys *FS) Chown(name string, uid, gid int) error {
	return fsys.changeOnInode("chown", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err == nil {
			err = notPinned(in)
		}
		if err != nil {
			return false, err
		}
		if !validID(uid) || !validID(gid) {
			return false, syscall.EINVAL
		}
		if started, err := c.chown(in, uid, gid); err != nil {
			return started, err
		}
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}

// chown is Chown's change of in, ids already checked, without the touch
// and the store of the inode item that the caller makes.
func (c *wctx) chown(in *winode, uid, gid int) (started bool, err error) {
	var capKey disk.Key
	var capKeep []disk.DirItem
	hasCap := false
	if !in.item.IsDir() {
		if capKey, capKeep, hasCap, err = c.xattrWithout(in.ino, capabilityXattr); err != nil {
			return false, err
		}
	}
	if uid != -1 {
		in.item.UID = uint32(uid)
	}
	if gid != -1 {
		in.item.GID = uint32(gid)
	}
	if !in.item.IsDir() {
		in.item.Mode &^= disk.ModeSetUID
		if in.item.Mode&0o010 != 0 {
			in.item.Mode &^= disk.ModeSetGID
		}
	}
	if hasCap {
		if err := c.replaceItem(capKey, capKeep); err != nil {
			return true, err
		}
	}
	return hasCap, nil
}

// validID reports whether id is -1 (keep) or a user or group id Linux
// accepts: 32 bits, and not (uid_t)-1.
func validID(id int) bool {
	return id == -1 || (id >= 0 && uint64(id) < 1<<32-1)
}

// Removexattr removes extended attribute attr of name (symlinks are not
// followed). An absent attribute is ENODATA; names are checked as by
// Setxattr (user., trusted. and security. only: EOPNOTSUPP; longer than
// 255 bytes: ERANGE). The change time becomes now.
func (fsys *FS) Removexattr(name, attr string) error {
	return fsys.changeOnInode("removexattr", name, func(c *wctx) (bool, error) {
		if err := checkXattrName(attr, nil); err != nil {
			return false, err
		}
		in, err := c.resolve(name)
		if err == nil {
			err = notPinned(in)
		}
		if err != nil {
			return false, err
		}
		if err := c.checkXattr(in, attr, nil); err != nil {
			return false, err
		}
		k, keep, found, err := c.xattrWithout(in.ino, attr)
		if err != nil {
			return false, err
		}
		if !found {
			return false, errNoData
		}
		applyProp(in, attr, nil)
		if err := c.replaceItem(k, keep); err != nil {
			return true, err
		}
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}

// xattrWithout reads the XATTR_ITEM that holds attr of inode ino and
// returns its key, its other entries, and whether attr was among them.
func (c *wctx) xattrWithout(ino disk.ObjectID, attr string) (disk.Key, []disk.DirItem, bool, error) {
	k := disk.Key{ObjectID: ino, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(attr))}
	data, ok, err := c.tr.Lookup(c.tx, k)
	if err != nil || !ok {
		return k, nil, false, err
	}
	entries, err := disk.ParseDirItems(data)
	if err != nil {
		return k, nil, false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "xattr item", Err: err}
	}
	keep := entries[:0]
	found := false
	for _, e := range entries {
		if string(e.Name) == attr {
			found = true
			continue
		}
		keep = append(keep, e)
	}
	return k, keep, found, nil
}
