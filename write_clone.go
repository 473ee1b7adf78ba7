package btrfs

import (
	"io/fs"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// Clone makes [dstOff, dstOff+length) of the regular file dst share the
// extents of [srcOff, srcOff+length) of src (a reflink, FICLONERANGE):
// each shared extent gains a reference, no data is copied. Offsets and
// length must be sector aligned, except that a range reaching the end of
// src may end there if it also reaches or passes the end of dst; length
// 0 means up to the end of src. src and dst may be the same file if the
// ranges do not overlap. Files whose NODATASUM flags differ cannot share
// (EINVAL), as in the kernel. dst grows when the range ends past its
// size. Data held inline in src is copied instead (it has no extent to
// share). src and dst may be in different subvolumes, as the kernel
// clones within one filesystem: src may be in a read-only snapshot, and
// each extent gains a reference of dst's subvolume, inode and offset.
func (fsys *FS) Clone(src string, srcOff int64, dst string, dstOff, length int64) error {
	if srcOff < 0 || dstOff < 0 || length < 0 {
		return &fs.PathError{Op: "clone", Path: dst, Err: syscall.EINVAL}
	}
	if !validPath(src) {
		return &fs.PathError{Op: "clone", Path: src, Err: fs.ErrInvalid}
	}
	return fsys.dataChange("clone", dst, func(c *wctx, t *txn.Txn) (bool, error) {
		// The source is only read: it may be in a read-only snapshot, or
		// in any other subvolume (the kernel clones across subvolumes of
		// one filesystem; each extent gains a reference of dst's tree).
		sin, err := c.lookupReadOnly(src)
		if err == nil {
			err = checkRegular(sin)
		}
		if err != nil {
			return false, err
		}
		din, err := c.resolveRegular(dst)
		if err == nil {
			err = mayChange(din, -1)
		}
		if err != nil {
			return false, err
		}
		if din.tr == sin.tr && din.ino == sin.ino {
			din = sin
		}
		n, err := cloneRange(sin, din, uint64(srcOff), uint64(dstOff), uint64(length), uint64(fsys.sb.SectorSize))
		if err != nil || n == 0 {
			return false, err
		}
		if err := c.clone(sin, din, uint64(srcOff), uint64(dstOff), n); err != nil {
			return true, err
		}
		c.tr = din.tr
		c.touch(din, c.now(), true)
		return true, c.putInode(din)
	})
}

// cloneRange checks a clone request and returns its length (length 0:
// to the end of src).
func cloneRange(sin, din *winode, srcOff, dstOff, length, ss uint64) (uint64, error) {
	ssize := sin.item.Size
	if length == 0 {
		if srcOff >= ssize {
			return 0, nil
		}
		length = ssize - srcOff
	}
	switch {
	case srcOff+length < srcOff || dstOff+length < dstOff || srcOff+length > ssize:
		return 0, syscall.EINVAL
	case dstOff+length > maxFileSize:
		return 0, syscall.EFBIG
	case srcOff%ss != 0 || dstOff%ss != 0:
		return 0, syscall.EINVAL
	case length%ss != 0 && (srcOff+length != ssize || dstOff+length < din.item.Size):
		return 0, syscall.EINVAL
	case sin.item.Flags&disk.InodeNoDataSum != din.item.Flags&disk.InodeNoDataSum:
		return 0, syscall.EINVAL
	case sin == din && srcOff < dstOff+length && dstOff < srcOff+length:
		return 0, syscall.EINVAL
	}
	return length, nil
}

// maxFileSize is the largest file size Linux allows (MAX_LFS_FILESIZE):
// sizes are signed 64-bit in the VFS.
const maxFileSize = 1<<63 - 1

// lookupReadOnly is lookupPath for a file the change only reads (a
// clone's source): read-only subvolumes may be entered on the way, and a
// subvolume the writer could not change is no obstacle either.
func (c *wctx) lookupReadOnly(name string) (*winode, error) {
	c.readOnly = true
	defer func() { c.readOnly = false }()
	return c.lookupPath(name)
}

// clone shares [srcOff, srcOff+n) of sin at dstOff of din, which may be
// in another subvolume: the source's extents are read from its tree, the
// items and references go to dst's.
func (c *wctx) clone(sin, din *winode, srcOff, dstOff, n uint64) error {
	fsys := c.fsys
	ss := uint64(fsys.sb.SectorSize)
	l := roundUpTo(n, ss)
	c.tr = sin.tr
	sexts, err := c.fileExtents(sin.ino, srcOff, srcOff+l)
	if err != nil {
		return err
	}
	if len(sexts) > 0 && sexts[0].fe.Type == disk.FileExtentInline {
		buf := make([]byte, n)
		if err := c.readExtents(sin, sexts, srcOff, buf); err != nil {
			return err
		}
		c.tr = din.tr
		return c.write(din, buf, dstOff, nil)
	}
	c.tr = din.tr
	pol, err := fsys.policy(din)
	if err != nil {
		return err
	}
	if err := c.uninline(din, pol); err != nil {
		return err
	}
	items := shiftExtents(sexts, srcOff, l, dstOff)
	for _, e := range items {
		if e.fe.Type == disk.FileExtentPrealloc {
			// The kernel's lseek takes a file without this flag whose
			// nbytes equal its size to have no holes.
			din.item.Flags |= disk.InodePrealloc
		}
	}
	dexts, err := c.fileExtents(din.ino, dstOff, dstOff+l)
	if err != nil {
		return err
	}
	del, keep := cutRange(dexts, dstOff, dstOff+l)
	add := mergeSorted(keep, items)
	if !fsys.noHoles() {
		add = mergeSorted(add, holeItems(add, dstOff, dstOff+l, c.gen))
		holes, err := c.holesIn(din, roundUpTo(din.item.Size, ss), dstOff)
		if err != nil {
			return err
		}
		add = mergeSorted(add, holes)
	}
	if err := c.apply(din, del, add); err != nil {
		return err
	}
	din.item.Size = max(din.item.Size, dstOff+n)
	return nil
}
