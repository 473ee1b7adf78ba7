package btrfs

import (
	"io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// CreateOptions are the settings of a new inode beyond its name and
// mode. The zero value (and nil) makes it as Linux makes one for root with
// umask 0: owned by root, with its directory's default POSIX ACL and
// set-group-ID bit applied. Everything is part of the one change that
// makes the inode, so no commit can show it half made.
type CreateOptions struct {
	// UID and GID own the new inode. In a directory with the
	// set-group-ID bit the group is the directory's instead, and a new
	// directory gets the bit too, as on Linux.
	UID, GID uint32
	// Umask is the permission bits (0777) to clear from the mode, as a
	// process's umask does, when the directory has no default ACL; with
	// one, the ACL decides and Umask is not used (Linux's
	// posix_acl_create). Symlinks ignore it.
	Umask fs.FileMode
	// Exact makes the inode with exactly the mode and owner given:
	// nothing from the directory (default ACL, set-group-ID bit) and no
	// Umask. For copies that set every attribute of their source
	// themselves, as mkfs does.
	Exact bool
	// NoDataCow and NoDataSum give a new regular file the NODATACOW flag
	// (with NODATASUM, which it implies) or the NODATASUM flag, as the
	// kernel's nodatacow and nodatasum mount options do for every new
	// file; other kinds of inode ignore them. Exact does not turn them
	// off: they come from the caller, not the directory.
	NoDataCow, NoDataSum bool
	// InheritFrom names a directory (an io/fs path of the same FS) whose
	// set-group-ID bit, default ACL, inode flags and compression property
	// the new inode takes instead of its parent's, as if it were made
	// there. It is for a file made in a hidden place on behalf of another
	// directory, as the FUSE mount makes O_TMPFILE files (the kernel
	// makes them in the directory given to open). Exact overrules it.
	InheritFrom string
}

// Mkdir makes directory name with permission bits perm (and the set-id
// and sticky bits of perm), owned by root, as MkdirWith with nil options
// makes it. The parent must exist: EEXIST, ENOENT, ENOTDIR and
// ENAMETOOLONG come as *fs.PathError and change nothing.
func (fsys *FS) Mkdir(name string, perm fs.FileMode) error {
	return fsys.MkdirWith(name, perm, nil)
}

// MkdirWith is Mkdir with the owner, umask and inheritance of opts. A
// default ACL of the parent becomes the new directory's access ACL (with
// perm applied as Linux applies it) and its default ACL.
func (fsys *FS) MkdirWith(name string, perm fs.FileMode, opts *CreateOptions) error {
	_, err := fsys.create("mkdir", name, disk.ModeDir|UnixMode(perm)&0o7777, opts)
	return err
}

// MkdirStat is MkdirWith that also returns the new directory's Stat, as
// the change made it: a FUSE mkdir answers with the attributes, and
// reading them back would cost a search of the blocks the change has just
// copied.
func (fsys *FS) MkdirStat(name string, perm fs.FileMode, opts *CreateOptions) (*Stat, error) {
	return fsys.create("mkdir", name, disk.ModeDir|UnixMode(perm)&0o7777, opts)
}

// CreateEmpty makes an empty regular file name with permission bits perm,
// owned by root, as CreateEmptyWith with nil options makes it. Errors as
// for Mkdir.
func (fsys *FS) CreateEmpty(name string, perm fs.FileMode) error {
	return fsys.CreateEmptyWith(name, perm, nil)
}

// CreateEmptyWith is CreateEmpty with the owner, umask and inheritance of
// opts. A default ACL of the parent becomes the file's access ACL, with
// perm applied as Linux applies it.
func (fsys *FS) CreateEmptyWith(name string, perm fs.FileMode, opts *CreateOptions) error {
	_, err := fsys.create("create", name, disk.ModeRegular|UnixMode(perm)&0o7777, opts)
	return err
}

// CreateEmptyStat is CreateEmptyWith that also returns the new file's
// Stat, as the change made it (see MkdirStat).
func (fsys *FS) CreateEmptyStat(name string, perm fs.FileMode, opts *CreateOptions) (*Stat, error) {
	return fsys.create("create", name, disk.ModeRegular|UnixMode(perm)&0o7777, opts)
}

// CreateOpen is CreateEmptyStat that also opens the new file, as open(2)
// with O_CREAT|O_EXCL returns a descriptor: the File is open on the inode
// the change made, for reading and writing like one from OpenInode, with
// no lookup after the change (a FUSE create answers with the entry and an
// open handle at once). The File loads the inode at its first read, as
// any open File reloads it after a change. Errors as for Mkdir, and no
// File then.
func (fsys *FS) CreateOpen(name string, perm fs.FileMode, opts *CreateOptions) (*File, *Stat, error) {
	st, err := fsys.CreateEmptyStat(name, perm, opts)
	if err != nil {
		return nil, nil, err
	}
	return newFileOf(fsys, name, disk.ObjectID(st.Subvolume), disk.ObjectID(st.Ino)), st, nil
}

// create adds a new inode of mode (a directory or an empty file) under
// the name's parent: INODE_ITEM, INODE_REF, DIR_ITEM, DIR_INDEX, and the
// parent's size, times and transid. It returns the new inode's Stat.
func (fsys *FS) create(op, name string, mode uint32, opts *CreateOptions) (*Stat, error) {
	var st *Stat
	err := fsys.createChange(opts)(op, name, func(c *wctx) (bool, error) {
		at, err := c.prepareNew(name, opts)
		if err != nil {
			return false, err
		}
		in, err := c.linkIn(at, mode, opts)
		if err != nil {
			return true, err
		}
		// The item as linkNew inserted it: nothing after the insert
		// changes it.
		st = itemStat(c.tr.Owner(), in.ino, &in.item)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// createChange is how a creation with opts runs: beside changes in
// other directories (changeInDir), unless it inherits from another
// directory than its parent, which it then reads too.
func (fsys *FS) createChange(opts *CreateOptions) func(op, name string, fn func(c *wctx) (bool, error)) error {
	if opts != nil && opts.InheritFrom != "" {
		return fsys.change
	}
	return fsys.changeInDir
}

// newPlace is where a new inode goes: its parent directory and name,
// its inode number and DIR_INDEX there, and the directory it inherits
// from (the parent, or the one CreateOptions.InheritFrom names).
type newPlace struct {
	parent *winode
	base   string
	ino    disk.ObjectID
	index  uint64
	from   *winode
}

// prepareNew does the checks every creation of name starts with, picks
// the new inode's number and its DIR_INDEX in the parent, and resolves
// the directory it inherits from. It changes nothing, so its errors
// leave the transaction as it was.
func (c *wctx) prepareNew(name string, opts *CreateOptions) (at newPlace, err error) {
	from := (*winode)(nil)
	if opts != nil && opts.InheritFrom != "" && !opts.Exact {
		if from, err = c.inheritDir(opts.InheritFrom); err != nil {
			return newPlace{}, err
		}
	}
	if at.parent, at.base, err = c.prepareName(name); err != nil {
		return newPlace{}, err
	}
	if at.ino, err = c.newIno(); err != nil {
		return newPlace{}, err
	}
	if at.index, err = c.nextIndex(at.parent.ino); err != nil {
		return newPlace{}, err
	}
	at.from = at.parent
	if from != nil {
		at.from = from
	}
	return at, nil
}

// link writes the items of a new inode of mode at its place.
func (c *wctx) link(at newPlace, mode uint32, opts *CreateOptions) error {
	_, err := c.linkIn(at, mode, opts)
	return err
}

// linkIn is link that returns the new inode.
func (c *wctx) linkIn(at newPlace, mode uint32, opts *CreateOptions) (*winode, error) {
	now := c.now()
	in := &winode{ino: at.ino, item: c.newInodeItem(mode, now)}
	return in, c.linkNew(at, in, now, opts)
}

// newInodeItem is the INODE_ITEM of an inode of mode made now: created
// and changed in this transaction, one link, owned by root.
func (c *wctx) newInodeItem(mode uint32, now time.Time) disk.InodeItem {
	ts := disk.TimespecOf(now)
	return disk.InodeItem{Generation: c.gen, TransID: c.gen, NLink: 1, Mode: mode,
		ATime: ts, CTime: ts, MTime: ts, OTime: ts}
}

// linkNew inserts the INODE_ITEM of the new inode in and gives it its
// first name, at.base in at.parent, with the owner, mode and ACLs opts
// and at.from give it (createOwner, createACLs).
func (c *wctx) linkNew(at newPlace, in *winode, now time.Time, opts *CreateOptions) error {
	var o CreateOptions
	if opts != nil {
		o = *opts
	}
	parent, from := at.parent, at.from
	var access, def []byte
	if !o.Exact {
		createOwner(from, in, &o)
		var err error
		if access, def, err = c.inTree(from, func() ([]byte, []byte, error) {
			return c.createACLs(from, in, UnixMode(o.Umask))
		}); err != nil {
			return err
		}
	}
	in.item.UID, in.item.GID = o.UID, o.GID
	ibuf := make([]byte, disk.InodeItemSize)
	inheritFlags(from, in)
	if in.item.IsRegular() {
		if o.NoDataSum {
			in.item.Flags |= disk.InodeNoDataSum
		}
		if o.NoDataCow {
			in.item.Flags |= disk.InodeNoDataCow | disk.InodeNoDataSum
		}
	}
	in.item.Encode(ibuf)
	if err := c.tr.InsertItem(c.tx, disk.Key{ObjectID: in.ino, Type: disk.InodeItemKey}, ibuf); err != nil {
		return err
	}
	if err := c.addName(parent, at.base, in, at.index, refKey(in.ino, parent.ino)); err != nil {
		return err
	}
	if err := c.inheritProps(from, in); err != nil {
		return err
	}
	if access != nil {
		if err := c.setNewXattr(in.ino, aclAccessName, access); err != nil {
			return err
		}
	}
	if def != nil {
		if err := c.setNewXattr(in.ino, aclDefaultName, def); err != nil {
			return err
		}
	}
	c.touch(parent, now, true)
	return c.putInode(parent)
}

// inheritDir resolves the directory of CreateOptions.InheritFrom. The
// change's current tree is kept.
func (c *wctx) inheritDir(name string) (*winode, error) {
	saved := c.tr
	defer func() { c.tr = saved }()
	in, err := c.lookupPath(name)
	if err != nil {
		return nil, &fs.PathError{Op: "inherit", Path: name, Err: err}
	}
	if !in.item.IsDir() {
		return nil, &fs.PathError{Op: "inherit", Path: name, Err: syscall.ENOTDIR}
	}
	return in, nil
}

// inTree runs f with the change's current tree switched to the one
// holding in, for reads of in's items (its xattrs) when in may live in
// another subvolume than the inode being made.
func (c *wctx) inTree(in *winode, f func() ([]byte, []byte, error)) ([]byte, []byte, error) {
	if in.tr == nil || in.tr == c.tr {
		return f()
	}
	saved := c.tr
	c.tr = in.tr
	defer func() { c.tr = saved }()
	return f()
}

// createOwner applies a set-group-ID parent to the owner of a new inode,
// as Linux's inode_init_owner does: the parent's group, and the bit
// itself on a new directory.
func createOwner(parent, in *winode, o *CreateOptions) {
	if parent.item.Mode&disk.ModeSetGID == 0 {
		return
	}
	o.GID = parent.item.GID
	if in.item.IsDir() {
		in.item.Mode |= disk.ModeSetGID
	}
}

// addName adds the name base of in to directory parent: the back-reference
// in item rk (from planBackref), the DIR_ITEM entry, the DIR_INDEX item,
// and the parent's size. The caller updates and writes the parent's times.
func (c *wctx) addName(parent *winode, base string, in *winode, index uint64, rk disk.Key) error {
	name := []byte(base)
	if err := c.addBackref(rk, parent.ino, name, index); err != nil {
		return err
	}
	entry := disk.DirItem{Location: disk.Key{ObjectID: in.ino, Type: disk.InodeItemKey}, TransID: c.gen,
		Type: disk.FileTypeOfMode(in.item.Mode), Name: name}
	dk := disk.Key{ObjectID: parent.ino, Type: disk.DirItemKey, Offset: disk.NameHash(entry.Name)}
	if err := c.addHashed(dk, entry); err != nil {
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

// Chmod sets the permission, set-id and sticky bits of name (symlinks are
// not followed); the file type stays.
func (fsys *FS) Chmod(name string, mode fs.FileMode) error {
	return fsys.changeOnInode("chmod", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err == nil {
			err = notPinned(in)
		}
		if err != nil {
			return false, err
		}
		in.item.Mode = in.item.Mode&disk.ModeTypeMask | UnixMode(mode)&0o7777
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}

// Chtimes sets the access and modification times of name (symlinks are
// not followed); the change time becomes now.
func (fsys *FS) Chtimes(name string, atime, mtime time.Time) error {
	return fsys.changeOnInode("chtimes", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err == nil {
			err = notPinned(in)
		}
		if err != nil {
			return false, err
		}
		in.item.ATime = disk.TimespecOf(atime)
		in.item.MTime = disk.TimespecOf(mtime)
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}

// xattrPrefixes are the namespaces taken as opaque bytes. Of system.,
// only the two POSIX ACL names are taken (aclNames), after their format
// is checked as the kernel checks it.
var xattrPrefixes = []string{"user.", "trusted.", "security."}

// Setxattr sets extended attribute attr of name (symlinks are not
// followed) to value, replacing an existing value. The user., trusted.
// and security. namespaces take any value; system.posix_acl_access and
// system.posix_acl_default take a POSIX ACL in the kernel's xattr form
// (EINVAL otherwise; a default ACL only on a directory, else EACCES);
// any other name is EOPNOTSUPP. An attribute that would not fit in a
// leaf is ENOSPC, as on Linux. The inode's mode is not derived from an
// access ACL: callers that copy files set both, as they were.
func (fsys *FS) Setxattr(name, attr string, value []byte) error {
	return fsys.changeOnInode("setxattr", name, func(c *wctx) (bool, error) {
		if err := checkXattrName(attr, value); err != nil {
			return false, err
		}
		in, err := c.resolve(name)
		if err == nil {
			err = notPinned(in)
		}
		if err != nil {
			return false, err
		}
		if value == nil {
			value = []byte{} // an empty value, not a removal
		}
		if err := c.checkXattr(in, attr, value); err != nil {
			return false, err
		}
		applyProp(in, attr, value)
		k := disk.Key{ObjectID: in.ino, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(attr))}
		data, found, err := c.tr.Lookup(c.tx, k)
		if err != nil {
			return false, err
		}
		var entries []disk.DirItem
		if found {
			if entries, err = disk.ParseDirItems(data); err != nil {
				return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "xattr item", Err: err}
			}
		}
		entries = setEntry(entries, disk.DirItem{TransID: c.gen, Type: disk.FtXattr,
			Name: []byte(attr), Data: append([]byte(nil), value...)})
		if disk.DirItemsSize(entries) > c.maxItemSize() {
			return false, syscall.ENOSPC
		}
		if err := c.replaceItem(k, entries); err != nil {
			return true, err
		}
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}

// xattrSizeMax is the largest value Linux passes to a filesystem.
const xattrSizeMax = 64 << 10

// checkXattrName makes the checks Linux makes before it looks the path
// up: a name of 1 to 255 bytes without NUL (ERANGE) and a value of at most
// 64 KiB (E2BIG).
func checkXattrName(attr string, value []byte) error {
	if len(attr) == 0 || len(attr) > disk.NameMax || strings.IndexByte(attr, 0) >= 0 {
		return syscall.ERANGE
	}
	if len(value) > xattrSizeMax {
		return syscall.E2BIG
	}
	return nil
}

// checkXattr makes the checks Linux makes once it has the inode, in its
// order: user. attributes only on regular files and directories (EPERM),
// a namespace the filesystem takes (EOPNOTSUPP), a valid POSIX ACL
// (EINVAL), a default ACL only on a directory (EACCES), and an item that
// fits in a leaf (ENOSPC). value is nil for a removal.
func (c *wctx) checkXattr(in *winode, attr string, value []byte) error {
	if strings.HasPrefix(attr, "btrfs.") {
		return c.checkProp(in, attr, value) // compress_property.go
	}
	if strings.HasPrefix(attr, "user.") {
		if t := in.item.Mode & disk.ModeTypeMask; t != disk.ModeRegular && t != disk.ModeDir {
			return syscall.EPERM
		}
	}
	ok := aclNames[attr]
	for _, p := range xattrPrefixes {
		if strings.HasPrefix(attr, p) && len(attr) > len(p) {
			ok = true
		}
	}
	if !ok {
		return syscall.EOPNOTSUPP
	}
	if value == nil {
		return nil
	}
	if aclNames[attr] {
		if err := checkACL(value); err != nil {
			return err
		}
		if attr == "system.posix_acl_default" && !in.item.IsDir() {
			return syscall.EACCES
		}
	}
	if disk.DirItemBaseSize+len(attr)+len(value) > c.maxItemSize() {
		return syscall.ENOSPC
	}
	return nil
}

// maxItemSize is the largest item a leaf holds: its data area less one
// item header.
func (c *wctx) maxItemSize() int {
	return disk.MaxItemDataSize(c.tx.Store().Params().NodeSize)
}

// setEntry replaces the entry with e's name in entries, or appends e.
func setEntry(entries []disk.DirItem, e disk.DirItem) []disk.DirItem {
	for i := range entries {
		if string(entries[i].Name) == string(e.Name) {
			entries[i] = e
			return entries
		}
	}
	return append(entries, e)
}
