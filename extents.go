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
// checked as fileExtentsIn checks them.
func (fsys *FS) loadExtents(in *inode) ([]extent, error) {
	return fileExtentsIn(fsys.itemsOf(in.sv), in.ino, disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey}, 0, ^uint64(0))
}

// find returns the index of the first extent that ends after off.
func findExtent(exts []extent, off uint64) int {
	return sort.Search(len(exts), func(i int) bool { return exts[i].start+exts[i].length > off })
}
