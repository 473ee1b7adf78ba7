package btrfs

import (
	"strings"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/compress"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// The btrfs.compression property (`btrfs property set PATH compression
// zstd`, or `setfattr -n btrfs.compression`) is an xattr the kernel
// validates and mirrors into the inode's flags: an algorithm sets
// COMPRESS (clearing NOCOMPRESS), "no" or "none" sets NOCOMPRESS, and
// removing it clears both. New files and directories inherit the
// property and the flags of their parent directory, and a write to a
// file with the property compresses with the property's algorithm before
// the filesystem's (Options.Compress) and before zlib, the kernel's
// choice for chattr +c alone. This file holds that behaviour; the write
// path calls it at three points (checkXattr, Setxattr/Removexattr, and
// linkNew) and policy asks propCompression.

// PropCompression is the xattr name of the compression property.
const PropCompression = "btrfs.compression"

// checkProp validates a btrfs.* xattr as the kernel's property handlers
// do: only btrfs.compression exists (EINVAL for other names), its value
// starts with zlib, lzo or zstd (a level may follow, "zstd:3") or is
// "no" or "none", and it applies to regular files and directories that
// are not NODATACOW (EINVAL). An empty value or a removal always passes.
func (c *wctx) checkProp(in *winode, attr string, value []byte) error {
	if attr != PropCompression {
		return syscall.EINVAL
	}
	if len(value) == 0 {
		return nil
	}
	if !propApplies(in) {
		return syscall.EINVAL
	}
	if _, ok := parsePropCompression(string(value)); !ok {
		return syscall.EINVAL
	}
	return nil
}

// propApplies reports whether the compression property means anything
// for in (the kernel's prop_compression_ignore, negated).
func propApplies(in *winode) bool {
	t := in.item.Mode & disk.ModeTypeMask
	return (t == disk.ModeRegular || t == disk.ModeDir) && in.item.Flags&disk.InodeNoDataCow == 0
}

// parsePropCompression reads a property value: the algorithm (None for
// "no" and "none") and whether the value is valid. As the kernel, only
// the prefix names the algorithm.
func parsePropCompression(v string) (compress.Type, bool) {
	switch v {
	case "no", "none":
		return compress.None, true
	}
	for _, a := range []struct {
		name string
		t    compress.Type
	}{{"zlib", compress.Zlib}, {"lzo", compress.LZO}, {"zstd", compress.Zstd}} {
		if strings.HasPrefix(v, a.name) {
			return a.t, true
		}
	}
	return compress.None, false
}

// applyProp mirrors a set (value not nil) or removal (nil) of a btrfs.*
// xattr into in's flags; the caller stores in.
func applyProp(in *winode, attr string, value []byte) {
	if attr != PropCompression {
		return
	}
	f := in.item.Flags &^ (disk.InodeCompress | disk.InodeNoCompress)
	if len(value) > 0 {
		if t, _ := parsePropCompression(string(value)); t == compress.None {
			f |= disk.InodeNoCompress
		} else {
			f |= disk.InodeCompress
		}
	}
	in.item.Flags = f
}

// inheritFlags gives a new inode the flags the kernel copies from its
// parent directory (btrfs_inherit_iflags): COMPRESS or NOCOMPRESS, and
// NODATACOW, which makes a regular file NODATASUM too.
func inheritFlags(parent, in *winode) {
	pf := parent.item.Flags
	switch {
	case pf&disk.InodeNoCompress != 0:
		in.item.Flags = in.item.Flags&^disk.InodeCompress | disk.InodeNoCompress
	case pf&disk.InodeCompress != 0:
		in.item.Flags = in.item.Flags&^disk.InodeNoCompress | disk.InodeCompress
	}
	if pf&disk.InodeNoDataCow != 0 {
		in.item.Flags |= disk.InodeNoDataCow
		if in.item.IsRegular() {
			in.item.Flags |= disk.InodeNoDataSum
		}
	}
}

// inheritProps copies the parent directory's compression property to the
// new inode in (already inserted), as the kernel's
// btrfs_inode_inherit_props does for regular files and directories. Only
// a parent with a compression flag can hold the property, so other
// creations cost no lookup.
func (c *wctx) inheritProps(parent, in *winode) error {
	if parent.item.Flags&(disk.InodeCompress|disk.InodeNoCompress) == 0 || !propApplies(in) {
		return nil
	}
	var ok bool
	v, _, err := c.inTree(parent, func() ([]byte, []byte, error) {
		v, found, err := c.propValue(parent.ino)
		ok = found
		return v, nil, err
	})
	if err != nil || !ok {
		return err
	}
	if _, valid := parsePropCompression(string(v)); !valid {
		return nil
	}
	k := disk.Key{ObjectID: in.ino, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(PropCompression))}
	return c.replaceItem(k, []disk.DirItem{{TransID: c.gen, Type: disk.FtXattr,
		Name: []byte(PropCompression), Data: v}})
}

// propValue returns the compression property of inode ino of the current
// tree.
func (c *wctx) propValue(ino disk.ObjectID) ([]byte, bool, error) {
	return c.xattrValue(ino, PropCompression)
}

// propCompression is the algorithm of in's compression property, when it
// has one naming an algorithm. Preconditions: the writer's lock is held
// and a transaction runs (policy is called from inside changes).
func (fsys *FS) propCompression(in *winode) (compress.Type, bool) {
	if in.tr == nil || fsys.w == nil || fsys.w.t == nil {
		return compress.None, false
	}
	c := &wctx{tx: fsys.w.t.Trans(), tr: in.tr}
	v, ok, err := c.propValue(in.ino)
	if err != nil || !ok {
		return compress.None, false
	}
	t, valid := parsePropCompression(string(v))
	return t, valid && t != compress.None
}
