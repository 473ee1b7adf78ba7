package btrfs

import (
	"io/fs"
	"strings"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// compressionXattr holds the compression property of an inode.
const compressionXattr = "btrfs.compression"

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
	algo, ok := compressionValue(value)
	if !ok {
		return &fs.PathError{Op: "set compression", Path: name, Err: syscall.EINVAL}
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
		switch algo {
		case "":
			in.item.Flags &^= disk.InodeCompress | disk.InodeNoCompress
		case "no":
			in.item.Flags = in.item.Flags&^disk.InodeCompress | disk.InodeNoCompress
		default:
			in.item.Flags = in.item.Flags&^disk.InodeNoCompress | disk.InodeCompress
		}
		switch algo {
		case "lzo":
			c.t.SetIncompat(disk.IncompatCompressLZO)
		case "zstd":
			c.t.SetIncompat(disk.IncompatCompressZstd)
		}
		if err := c.setCompressionXattr(in, value); err != nil {
			return true, err
		}
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}

// compressionValue validates a compression property value as the kernel
// does and returns its kind: "" (remove), "no", or the algorithm.
func compressionValue(v string) (string, bool) {
	switch v {
	case "":
		return "", true
	case "no", "none":
		return "no", true
	}
	for _, a := range []string{"zlib", "lzo", "zstd"} {
		if strings.HasPrefix(v, a) {
			return a, true
		}
	}
	return "", false
}

// setCompressionXattr stores value as in's compression property, or
// removes the property for "" (no error when there was none).
func (c *wctx) setCompressionXattr(in *winode, value string) error {
	k, keep, found, err := c.xattrWithout(in.ino, compressionXattr)
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
		Name: []byte(compressionXattr), Data: []byte(value)})
	return c.replaceItem(k, entries)
}
