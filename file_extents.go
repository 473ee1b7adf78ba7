package btrfs

import (
	"io/fs"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// FileExtent is one extent of a file's data, as FIEMAP reports it: the
// file range it covers and where it is stored. Holes are not extents.
type FileExtent struct {
	// Offset and Length are the file range, in bytes of file data.
	Offset, Length uint64
	// DiskAddr and DiskLength are the logical address and size of the
	// data extent holding the range (zero for inline data); ExtentOffset
	// is where the range starts in the extent's decoded data.
	DiskAddr, DiskLength, ExtentOffset uint64
	// Inline data sits in the tree; Prealloc is allocated but unwritten;
	// Compressed is stored compressed.
	Inline, Prealloc, Compressed bool
	// Shared is set when the data extent is referenced by another file,
	// another subvolume or a shared tree block, as the kernel's FIEMAP
	// flags FIEMAP_EXTENT_SHARED. A file that refers to one extent from
	// several of its own ranges does not share it.
	Shared bool
}

// FileExtents lists the extents of the named file (symlinks followed) in
// file order, as `btrfs filesystem du` counts them. On a writable FS it
// sees the running transaction: extents written since the last commit
// are listed too, shared when a clone of this transaction references
// them elsewhere. The Shared flag of an extent of an earlier commit says
// what that commit's extent tree holds.
func (fsys *FS) FileExtents(name string) ([]FileExtent, error) {
	fsys.rlock()
	defer fsys.runlock()
	in, err := fsys.walk("extents", name, true)
	if err != nil {
		return nil, err
	}
	if !in.item.IsRegular() {
		return nil, nil
	}
	exts, err := fsys.loadExtents(in)
	if err != nil {
		return nil, &fs.PathError{Op: "extents", Path: name, Err: err}
	}
	var et *ctree.Cursor
	shared := map[disk.LogicalAddr]bool{}
	var out []FileExtent
	for _, e := range exts {
		fe := &e.fe
		x := FileExtent{Offset: e.start, Length: e.length, Compressed: fe.Compression != disk.CompressNone}
		switch fe.Type {
		case disk.FileExtentInline:
			x.Inline = true
			out = append(out, x)
			continue
		case disk.FileExtentPrealloc:
			x.Prealloc = true
		}
		if fe.DiskBytenr == 0 {
			continue // a hole
		}
		x.DiskAddr, x.DiskLength, x.ExtentOffset = uint64(fe.DiskBytenr), fe.DiskNumBytes, fe.Offset
		s, seen := shared[fe.DiskBytenr]
		if !seen {
			if et == nil {
				ri, err := fsys.rootItem(disk.ExtentTreeObjectID)
				if err != nil {
					return nil, err
				}
				et = fsys.cursor(ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: disk.ExtentTreeObjectID})
			}
			if t := fsys.runningTxn(); t != nil {
				// Made in the running transaction: its extent item comes
				// at the commit, its references are the transaction's.
				var fresh bool
				if s, fresh = t.FreshDataShared(fe.DiskBytenr, in.sv.id, in.ino); fresh {
					shared[fe.DiskBytenr] = s
					x.Shared = s
					out = append(out, x)
					continue
				}
			}
			if s, err = extentShared(et, fe.DiskBytenr, fe.DiskNumBytes, in.sv.id, in.ino); err != nil {
				return nil, &fs.PathError{Op: "extents", Path: name, Err: err}
			}
			shared[fe.DiskBytenr] = s
		}
		x.Shared = s
		out = append(out, x)
	}
	return out, nil
}

// extentShared reports whether the data extent at addr has references
// other than data references of inode ino in tree root.
func extentShared(c *ctree.Cursor, addr disk.LogicalAddr, size uint64, root, ino disk.ObjectID) (bool, error) {
	k := disk.Key{ObjectID: disk.ObjectID(addr), Type: disk.ExtentItemKey, Offset: size}
	ok, err := c.Seek(k)
	if err != nil {
		return false, err
	}
	if !ok || c.Key() != k {
		return false, &disk.CorruptError{Tree: disk.ExtentTreeObjectID, Key: &k, What: "data extent without extent item"}
	}
	var item disk.ExtentItem
	if err := item.Decode(c.Data()); err != nil {
		return false, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.ExtentTreeObjectID, Key: &k, What: "extent item", Err: err}
	}
	var mine uint64
	for _, r := range item.InlineRefs {
		if r.Type != disk.ExtentDataRefKey || r.Data.Root != root || r.Data.ObjectID != ino {
			return true, nil
		}
		mine += uint64(r.Data.Count)
	}
	// References past the inline ones are items of their own.
	for ok, err = c.Next(); ok && err == nil && c.Key().ObjectID == disk.ObjectID(addr); ok, err = c.Next() {
		switch c.Key().Type {
		case disk.SharedDataRefKey:
			return true, nil
		case disk.ExtentDataRefKey:
			var r disk.ExtentDataRef
			if err := r.Decode(c.Data()); err != nil {
				kk := c.Key()
				return false, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.ExtentTreeObjectID, Key: &kk, What: "extent data ref", Err: err}
			}
			if r.Root != root || r.ObjectID != ino {
				return true, nil
			}
			mine += uint64(r.Count)
		}
	}
	if err != nil {
		return false, err
	}
	// References counted but not found are someone else's.
	return mine != item.Refs, nil
}

// runningTxn is the writable FS's running transaction, or nil (read-only
// opens, between transactions). The caller holds rlock, which keeps it.
func (fsys *FS) runningTxn() *txn.Txn {
	if fsys.w == nil {
		return nil
	}
	return fsys.w.t
}
