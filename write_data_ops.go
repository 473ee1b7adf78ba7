package btrfs

import (
	"cmp"
	"errors"
	"io/fs"
	"math"
	"slices"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// Truncate sets the size of the regular file name. Shrinking drops the
// extents past the new end (their references go) and rewrites a partial
// last sector with zeros after the end, so growing later shows zeros;
// growing adds a hole (hole items without NO_HOLES).
func (fsys *FS) Truncate(name string, size int64) error {
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: name, Err: syscall.EINVAL}
	}
	return fsys.truncateFound(name, nil, func(c *wctx) (*winode, error) { return c.resolveRegular(name) }, size)
}

// truncateFound is Truncate with the file found by find: by path, or by
// inode for an open File (key set: see writeAtFound).
func (fsys *FS) truncateFound(name string, key *dirKey, find func(c *wctx) (*winode, error), size int64) error {
	return fsys.dataChangeFound("truncate", name, key, func(c *wctx, t *txn.Txn) (bool, error) {
		in, err := find(c)
		if err == nil {
			err = mayChange(in, -1)
		}
		if err != nil {
			return false, err
		}
		if err := c.truncate(in, uint64(size)); err != nil {
			return true, err
		}
		c.touch(in, c.now(), true)
		return true, c.putInode(in)
	})
}

// truncate sets in's size as Truncate describes; the caller stores in.
func (c *wctx) truncate(in *winode, size uint64) error {
	fsys := c.fsys
	pol, err := fsys.policy(in)
	if err != nil {
		return err
	}
	ss, old := pol.ss, in.item.Size
	if size > 0 && size != old {
		// An inline extent always holds the whole file, as the kernel
		// keeps it: rewritten at the new size, or made regular when the
		// file no longer fits.
		first, err := c.fileExtents(in.ino, 0, 1)
		if err != nil {
			return err
		}
		if len(first) > 0 && first[0].fe.Type == disk.FileExtentInline {
			done, err := c.tryInline(in, pol, size, func([]byte) {}, nil)
			if done || err != nil {
				return err
			}
			if err := c.uninline(in, pol); err != nil {
				return err
			}
		}
	}
	switch {
	case size < old:
		a := roundUpTo(size, ss)
		exts, err := c.fileExtents(in.ino, a, math.MaxUint64)
		if err != nil {
			return err
		}
		del, keep := cutRange(exts, a, math.MaxUint64)
		if err := c.apply(in, del, keep); err != nil {
			return err
		}
		in.item.Size = size
		if size%ss != 0 {
			return c.zeroPart(in, pol, size, a)
		}
	case size > old && !fsys.noHoles():
		holes, err := c.holesIn(in, roundUpTo(old, ss), roundUpTo(size, ss))
		if err != nil {
			return err
		}
		if err := c.apply(in, nil, holes); err != nil {
			return err
		}
	}
	in.item.Size = size
	return nil
}

// zeroPart zeroes [lo, hi) inside one sector by rewriting the sector,
// unless nothing there holds data.
func (c *wctx) zeroPart(in *winode, pol dataPolicy, lo, hi uint64) error {
	s := roundDownTo(lo, pol.ss)
	exts, err := c.fileExtents(in.ino, s, s+pol.ss)
	if err != nil {
		return err
	}
	data := false
	for i := range exts {
		data = data || exts[i].dataLike()
	}
	if !data {
		return nil
	}
	buf := make([]byte, pol.ss)
	if err := c.readExtents(in, exts, s, buf); err != nil {
		return err
	}
	clear(buf[lo-s : hi-s])
	return c.replaceData(in, buf, s, pol, in.item.Size, nil, nil)
}

// PunchHole makes [off, off+length) of the regular file name read as
// zeros without changing its size: whole sectors lose their extents
// (hole items without NO_HOLES), partial sectors are zeroed by
// rewriting them. The part past the end of the file is ignored.
func (fsys *FS) PunchHole(name string, off, length int64) error {
	if off < 0 || length <= 0 || off+length < off {
		return &fs.PathError{Op: "punch", Path: name, Err: syscall.EINVAL}
	}
	return fsys.dataChangeOnInode("punch", name, func(c *wctx, t *txn.Txn) (bool, error) {
		in, err := c.resolveRegular(name)
		if err == nil {
			err = mayChange(in, -1)
		}
		if err != nil {
			return false, err
		}
		end := min(uint64(off+length), in.item.Size)
		if uint64(off) >= end {
			return false, nil
		}
		if err := c.punch(in, uint64(off), end); err != nil {
			return true, err
		}
		c.touch(in, c.now(), true)
		return true, c.putInode(in)
	})
}

// punch zeroes [off, end) of in, end within the size.
func (c *wctx) punch(in *winode, off, end uint64) error {
	fsys := c.fsys
	pol, err := fsys.policy(in)
	if err != nil {
		return err
	}
	ss, size := pol.ss, in.item.Size
	first, err := c.fileExtents(in.ino, 0, 1)
	if err != nil {
		return err
	}
	if len(first) > 0 && first[0].fe.Type == disk.FileExtentInline {
		// An inline file stays inline with the range zeroed, if it can.
		done, err := c.tryInline(in, pol, size, func(b []byte) { clear(b[off:end]) }, nil)
		if done || err != nil {
			return err
		}
		if err := c.uninline(in, pol); err != nil {
			return err
		}
	}
	a, b := roundUpTo(off, ss), roundDownTo(end, ss)
	if end == size {
		b = roundUpTo(size, ss)
	}
	if a > b { // inside one sector
		return c.zeroPart(in, pol, off, end)
	}
	if a < b {
		exts, err := c.fileExtents(in.ino, a, b)
		if err != nil {
			return err
		}
		del, keep := cutRange(exts, a, b)
		if !fsys.noHoles() {
			keep = mergeSorted(keep, []extent{holeExtent(a, b-a, c.gen)})
		}
		if err := c.apply(in, del, keep); err != nil {
			return err
		}
	}
	if off < a {
		if err := c.zeroPart(in, pol, off, a); err != nil {
			return err
		}
	}
	if b < end {
		return c.zeroPart(in, pol, b, end)
	}
	return nil
}

// Fallocate preallocates [off, off+length) of the regular file name:
// the parts that are holes get PREALLOC extents (unwritten, read as
// zeros, no checksums); data already there stays. Unless keepSize the
// size grows to off+length. The inode gets the PREALLOC flag.
func (fsys *FS) Fallocate(name string, off, length int64, keepSize bool) error {
	if off < 0 || length <= 0 || off+length < off {
		return &fs.PathError{Op: "fallocate", Path: name, Err: syscall.EINVAL}
	}
	return fsys.dataChangeOnInode("fallocate", name, func(c *wctx, t *txn.Txn) (bool, error) {
		in, err := c.resolveRegular(name)
		if err == nil {
			err = mayChange(in, int64(in.item.Size)) // allocating changes no data
		}
		if err != nil {
			return false, err
		}
		ss := uint64(fsys.sb.SectorSize)
		need, err := c.holeBytes(in.ino, roundDownTo(uint64(off), ss), roundUpTo(uint64(off+length), ss))
		if err == nil {
			err = c.checkDataSpace(need)
		}
		if err != nil {
			return false, err
		}
		if err := c.fallocate(in, uint64(off), uint64(off+length), keepSize); err != nil {
			return true, err
		}
		c.touch(in, c.now(), !keepSize)
		return true, c.putInode(in)
	})
}

// fallocate fills the holes of [off, end) of in with PREALLOC extents.
func (c *wctx) fallocate(in *winode, off, end uint64, keepSize bool) error {
	fsys, t := c.fsys, c.t
	pol, err := fsys.policy(in)
	if err != nil {
		return err
	}
	if err := c.uninline(in, pol); err != nil {
		return err
	}
	ss := pol.ss
	a, b := roundDownTo(off, ss), roundUpTo(end, ss)
	exts, err := c.fileExtents(in.ino, a, b)
	if err != nil {
		return err
	}
	var holes, solid []extent
	for _, e := range exts {
		if e.fe.IsHole() {
			holes = append(holes, e)
		} else {
			solid = append(solid, e)
		}
	}
	del, add := cutRange(holes, a, b)
	limit := uint64(disk.MaxExtentSize)
	for _, g := range holeItems(solid, a, b, 0) {
		for pos := g.start; pos < g.start+g.length; {
			n := min(g.start+g.length-pos, limit)
			addr, err := t.AllocData(n, 0)
			if errors.Is(err, alloc.ErrNoSpace) && n > ss {
				limit = max(ss, roundDownTo(n/2, ss))
				continue
			}
			if err != nil {
				return err
			}
			add = append(add, extent{start: pos, length: n, fe: disk.FileExtentItem{Generation: c.gen,
				RAMBytes: n, Type: disk.FileExtentPrealloc, DiskBytenr: addr, DiskNumBytes: n, NumBytes: n}})
			pos += n
		}
	}
	// Before NO_HOLES the gap between EOF and an allocation that starts
	// past it gets hole extents, KEEP_SIZE or not, as the kernel writes.
	if a > in.item.Size && !fsys.noHoles() {
		holes, err := c.holesIn(in, roundUpTo(in.item.Size, ss), a)
		if err != nil {
			return err
		}
		add = append(add, holes...)
	}
	if err := c.apply(in, del, sortExtents(add)); err != nil {
		return err
	}
	in.item.Flags |= disk.InodePrealloc
	if !keepSize && end > in.item.Size {
		in.item.Size = end
	}
	return nil
}

// sortExtents sorts items by file offset.
func sortExtents(exts []extent) []extent {
	slices.SortFunc(exts, func(a, b extent) int { return cmp.Compare(a.start, b.start) })
	return exts
}

// settableFlags are the inode flags SetInodeFlags changes, as chattr.
const settableFlags = disk.InodeNoDataSum | disk.InodeNoDataCow | disk.InodeNoCompress | disk.InodeCompress |
	disk.InodeSync | disk.InodeImmutable | disk.InodeAppend | disk.InodeNoDump | disk.InodeNoAtime | disk.InodeDirSync

// SetInodeFlags sets and clears inode flags of name, as chattr does:
// NODATACOW on a regular file takes effect only while the file is empty
// and then brings NODATASUM (clearing it on an empty file clears both),
// as in the kernel; on a non-empty file the request is ignored.
// NODATASUM alone can only change on a file without extents (checksums
// must match the flag): EINVAL otherwise. COMPRESS and NOCOMPRESS exclude
// each other. Other bits are EINVAL. IMMUTABLE and APPEND are enforced
// by every operation (EPERM, as the kernel does).
func (fsys *FS) SetInodeFlags(name string, set, clear uint64) error {
	s, cl := disk.InodeFlags(set), disk.InodeFlags(clear)
	if (s|cl)&^settableFlags != 0 || s&cl != 0 {
		return &fs.PathError{Op: "setflags", Path: name, Err: syscall.EINVAL}
	}
	return fsys.changeOnInode("setflags", name, func(c *wctx) (bool, error) {
		in, err := c.resolve(name)
		if err != nil {
			return false, err
		}
		f, err := c.newFlags(in, s, cl)
		if err != nil {
			return false, err
		}
		in.item.Flags = f
		c.touch(in, c.now(), false)
		return true, c.putInode(in)
	})
}

// newFlags computes the flags SetInodeFlags gives in.
func (c *wctx) newFlags(in *winode, set, clear disk.InodeFlags) (disk.InodeFlags, error) {
	f := in.item.Flags
	empty := true
	if in.item.IsRegular() {
		exts, err := c.fileExtents(in.ino, 0, math.MaxUint64)
		if err != nil {
			return 0, err
		}
		empty = len(exts) == 0 && in.item.Size == 0
	}
	if (set|clear)&disk.InodeNoDataSum != 0 && !empty {
		return 0, syscall.EINVAL
	}
	f = f&^clear | set&^(disk.InodeNoDataCow)
	switch {
	case set&disk.InodeNoDataCow != 0 && !in.item.IsRegular():
		f |= disk.InodeNoDataCow
	case set&disk.InodeNoDataCow != 0 && empty:
		f |= disk.InodeNoDataCow | disk.InodeNoDataSum
	case clear&disk.InodeNoDataCow != 0 && in.item.IsRegular() && empty:
		f &^= disk.InodeNoDataSum
	}
	if set&disk.InodeCompress != 0 {
		f &^= disk.InodeNoCompress
	}
	if set&disk.InodeNoCompress != 0 {
		f &^= disk.InodeCompress
	}
	return f, nil
}

// dropFileData removes every EXTENT_DATA item of in and the references
// they hold (the caller deletes the inode's other items).
func (c *wctx) dropFileData(in *winode) error {
	exts, err := c.fileExtents(in.ino, 0, math.MaxUint64)
	if err != nil || len(exts) == 0 {
		return err
	}
	return c.apply(in, exts, nil)
}
