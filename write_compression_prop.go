package btrfs

import (
	"io/fs"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/compress"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// SetCompression sets the compression property of name (the
// btrfs.compression xattr), as `btrfs property set PATH compression
// VALUE` does on Linux: "zlib", "lzo" or "zstd" (anything starting with
// one, such as "zstd:3") stores the value and sets the inode's COMPRESS
// flag; "no" or "none" stores it and sets NOCOMPRESS; "" removes the
// property and clears both. lzo and zstd also set their incompat feature.
// Other values are EINVAL, as is a name that is no regular file or
// directory; an immutable or append-only inode is EPERM. Symbolic links
// are not followed.
func (fsys *FS) SetCompression(name, value string) error {
	// The value is checked, and mirrored into the flags, as a
	// setfattr of the property is (compress_property.go).
	var prop []byte
	if value != "" {
		if _, ok := parsePropCompression(value); !ok {
			return &fs.PathError{Op: "set compression", Path: name, Err: syscall.EINVAL}
		}
		prop = []byte(value)
	}
	return fsys.change("set compression", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err == nil {
			err = notPinned(in)
		}
		if err != nil {
			return false, err
		}
		if !in.item.IsRegular() && !in.item.IsDir() {
			return false, syscall.EINVAL
		}
		applyProp(in, PropCompression, prop)
		switch t, _ := parsePropCompression(value); t {
		case compress.LZO:
			c.t.SetIncompat(disk.IncompatCompressLZO)
		case compress.Zstd:
			c.t.SetIncompat(disk.IncompatCompressZstd)
		}
		if err := c.setCompressionXattr(in, value); err != nil {
			return true, err
		}
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}

// setCompressionXattr stores value as in's compression property, or
// removes the property for "" (no error when there was none).
func (c *wctx) setCompressionXattr(in *winode, value string) error {
	k, keep, found, err := c.xattrWithout(in.ino, PropCompression)
	if err != nil {
		return err
	}
	if value == "" {
		if !found {
			return nil
		}
		return c.replaceItem(k, keep)
	}
	entries := append(keep, disk.DirItem{TransID: c.gen, Type: disk.FtXattr,
		Name: []byte(PropCompression), Data: []byte(value)})
	return c.replaceItem(k, entries)
}
