package btrfs

import (
	"bytes"
	"io/fs"
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Xattr is one extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// Xattrs returns every extended attribute of the named entry, in every
// namespace (user., trusted., security., system.), sorted by name. A final
// symlink is not followed (like llistxattr).
func (fsys *FS) Xattrs(name string) ([]Xattr, error) {
	fsys, done := fsys.reader()
	defer done()
	in, err := fsys.walk("listxattr", name, false)
	if err != nil {
		return nil, err
	}
	xs, err := fsys.xattrs(in)
	if err != nil {
		return nil, &fs.PathError{Op: "listxattr", Path: name, Err: err}
	}
	return xs, nil
}

// Getxattr returns one attribute of the named entry without following a
// final symlink; a missing attribute is ENODATA, as lgetxattr says.
func (fsys *FS) Getxattr(name, attr string) ([]byte, error) {
	fsys, done := fsys.reader()
	defer done()
	in, err := fsys.walk("getxattr", name, false)
	if err != nil {
		return nil, err
	}
	k := disk.Key{ObjectID: in.ino, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(attr))}
	data, ok, err := fsys.lookupItem(in.sv.root, k)
	if err != nil {
		return nil, &fs.PathError{Op: "getxattr", Path: name, Err: err}
	}
	if ok {
		items, err := disk.ParseDirItems(data)
		if err != nil {
			return nil, &fs.PathError{Op: "getxattr", Path: name, Err: &disk.CorruptError{Tree: in.sv.id, Key: &k, What: "xattr item", Err: err}}
		}
		for _, it := range items {
			if bytes.Equal(it.Name, []byte(attr)) {
				return it.Data, nil
			}
		}
	}
	return nil, &fs.PathError{Op: "getxattr", Path: name, Err: errNoData}
}

func (fsys *FS) xattrs(in *inode) ([]Xattr, error) {
	c := fsys.cursor(in.sv.root)
	var out []Xattr
	ok, err := c.Seek(disk.Key{ObjectID: in.ino, Type: disk.XattrItemKey})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.ObjectID != in.ino || k.Type != disk.XattrItemKey {
			break
		}
		items, perr := disk.ParseDirItems(c.Data())
		if perr != nil {
			return nil, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: in.sv.id, Key: &k, What: "xattr item", Err: perr}
		}
		for _, it := range items {
			out = append(out, Xattr{Name: string(it.Name), Value: it.Data})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}
