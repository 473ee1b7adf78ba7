package btrfs

import (
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// extent is one EXTENT_DATA item of a file: the file range
// [start, start+length) and how it is stored.
type extent struct {
	start  uint64
	length uint64
	fe     disk.FileExtentItem
}

// dataLike reports whether the range holds data as SEEK_DATA sees it:
// inline and regular extents do; holes and preallocated (unwritten)
// extents read as zeros and count as holes.
func (e *extent) dataLike() bool {
	switch e.fe.Type {
	case disk.FileExtentInline:
		return true
	case disk.FileExtentReg:
		return e.fe.DiskBytenr != 0
	}
	return false
}

// loadExtents reads every EXTENT_DATA item of the inode, in file order,
// checking that they do not overlap.
func (fsys *FS) loadExtents(in *inode) ([]extent, error) {
	c := fsys.cursor(in.sv.root)
	var out []extent
	var end uint64
	ok, err := c.Seek(disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey})
	for ; ok && err == nil; ok, err = c.Next() {
		k := c.Key()
		if k.ObjectID != in.ino || k.Type != disk.ExtentDataKey {
			break
		}
		var e extent
		if derr := e.fe.Decode(c.Data()); derr != nil {
			return nil, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: in.sv.id, Key: &k, What: "file extent", Err: derr}
		}
		e.start = k.Offset
		if e.fe.Type == disk.FileExtentInline {
			e.length = e.fe.RAMBytes
		} else {
			e.length = e.fe.NumBytes
		}
		if e.start < end {
			return nil, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: in.sv.id, Key: &k, What: "file extent overlaps the previous one"}
		}
		if e.start+e.length < e.start {
			return nil, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: in.sv.id, Key: &k, What: "file extent length overflows"}
		}
		end = e.start + e.length
		out = append(out, e)
	}
	return out, err
}

// find returns the index of the first extent that ends after off.
func findExtent(exts []extent, off uint64) int {
	return sort.Search(len(exts), func(i int) bool { return exts[i].start+exts[i].length > off })
}
