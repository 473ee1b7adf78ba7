package btrfs

import (
	"io/fs"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// dirEntry is one name in a directory, as DIR_INDEX or DIR_ITEM records it.
type dirEntry struct {
	name  string
	typ   disk.FileType
	loc   disk.Key // (ino, INODE_ITEM, 0) or (subvol id, ROOT_ITEM, x)
	index uint64   // DIR_INDEX sequence, 0 when found by hash
}

// lookup finds name in directory dir through the DIR_ITEM hash bucket.
func (fsys *FS) lookup(dir *inode, name string) (*dirEntry, bool, error) {
	it, err := findDirItem(fsys.itemsOf(dir.sv), dir.ino, name)
	if err != nil || it == nil {
		return nil, false, err
	}
	return &dirEntry{name: name, typ: it.Type, loc: it.Location}, true, nil
}

// resolveEntry loads the inode a directory entry points to, entering a
// subvolume when the entry is one.
func (fsys *FS) resolveEntry(dir *inode, e *dirEntry) (*inode, error) {
	switch e.loc.Type {
	case disk.InodeItemKey:
		return fsys.loadInode(dir.sv, e.loc.ObjectID)
	case disk.RootItemKey:
		linked, err := fsys.subvolLinked(dir, e)
		if err != nil {
			return nil, err
		}
		if !linked {
			return emptySubvolDir(dir.sv), nil
		}
		sv, err := fsys.subvolume(e.loc.ObjectID)
		if err != nil {
			return nil, err
		}
		return fsys.loadInode(sv, sv.dirID)
	}
	loc := e.loc
	return nil, &disk.CorruptError{Tree: dir.sv.id, Key: &loc, What: "directory entry " + e.name + " points to an unknown key type"}
}

// readDir lists a directory's entries in DIR_INDEX order (creation order,
// as the kernel's readdir returns them), starting after index from.
// n <= 0 means all.
func (fsys *FS) readDir(dir *inode, from uint64, n int) ([]*dirEntry, error) {
	c := fsys.cursor(dir.sv.root)
	start := disk.Key{ObjectID: dir.ino, Type: disk.DirIndexKey, Offset: from + 1}
	var out []*dirEntry
	ok, err := c.Seek(start)
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.ObjectID != dir.ino || k.Type != disk.DirIndexKey {
			break
		}
		items, perr := disk.ParseDirItems(c.Data())
		if perr != nil || len(items) != 1 {
			return out, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: dir.sv.id, Key: &k, What: "dir index", Err: perr}
		}
		it := items[0]
		out = append(out, &dirEntry{name: string(it.Name), typ: it.Type, loc: it.Location, index: k.Offset})
		if n > 0 && len(out) == n {
			break
		}
	}
	return out, err
}

// fsDirEntry implements fs.DirEntry, loading the inode only for Info.
type fsDirEntry struct {
	fsys *FS
	dir  *inode
	e    *dirEntry
}

func (d *fsDirEntry) Name() string { return d.e.name }
func (d *fsDirEntry) IsDir() bool  { return d.e.typ.Base() == disk.FtDir }
func (d *fsDirEntry) Type() fs.FileMode {
	mode := d.e.typ.Base().Mode()
	if mode == 0 {
		// An unknown entry type: all that is known is that it is not a
		// regular file.
		return fs.ModeIrregular
	}
	return FileModeOf(mode).Type()
}
func (d *fsDirEntry) Info() (fs.FileInfo, error) {
	r, done := d.fsys.reader()
	defer done()
	dir, err := r.fresh(d.dir)
	if err != nil {
		return nil, err
	}
	in, err := r.resolveEntry(dir, d.e)
	if err != nil {
		return nil, err
	}
	return &fileInfo{name: d.e.name, in: in}, nil
}
func (d *fsDirEntry) String() string { return fs.FormatDirEntry(d) }

// emptySubvolDirIno is the inode number the kernel gives the empty
// directory it shows in place of a subvolume entry whose subvolume is not
// linked there (BTRFS_EMPTY_SUBVOL_DIR_OBJECTID): what a snapshot holds
// where its source had a nested subvolume, since snapshots do not recurse.
const emptySubvolDirIno = 2

// emptySubvolDir is that directory: empty, mode 0755, no stored times.
func emptySubvolDir(sv *subvol) *inode {
	in := &inode{sv: sv, ino: emptySubvolDirIno}
	in.item.Mode = disk.ModeDir | 0o755
	in.item.NLink = 1
	return in
}

// subvolLinked reports whether the subvolume entry e in dir is the real
// link of its subvolume: the root tree holds a ROOT_REF from dir's
// subvolume to it naming the same directory and name.
func (fsys *FS) subvolLinked(dir *inode, e *dirEntry) (bool, error) {
	c := fsys.cursor(fsys.rootTree)
	k := disk.Key{ObjectID: dir.sv.id, Type: disk.RootRefKey, Offset: uint64(e.loc.ObjectID)}
	ok, err := c.Seek(k)
	if err != nil || !ok || c.Key() != k {
		return false, err
	}
	var ref disk.RootRef
	if err := ref.Decode(c.Data()); err != nil {
		return false, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k, What: "root ref", Err: err}
	}
	return ref.DirID == dir.ino && string(ref.Name) == e.name, nil
}
