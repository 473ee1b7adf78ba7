package btrfs

import (
	"github.com/gobtrfs/btrfs/internal/disk"
)

// This file is the pure part of the data write path: given the
// EXTENT_DATA items of a file around a range, what items a change
// produces, what references move and how nbytes changes. Nothing here
// touches a tree, so it is tested against a byte-array model
// (write_extents_test.go).

// dataRef names one EXTENT_DATA_REF of a file: the disk extent and the
// file position of the extent's byte 0 (key offset minus the item's
// offset field), the triple the extent tree counts items under.
type dataRef struct {
	bytenr   disk.LogicalAddr
	numBytes uint64
	pos      uint64
}

// refOf returns the reference an item holds, and false for items that
// hold none (inline extents and holes).
func refOf(e *extent) (dataRef, bool) {
	if e.fe.Type == disk.FileExtentInline || e.fe.DiskBytenr == 0 {
		return dataRef{}, false
	}
	return dataRef{e.fe.DiskBytenr, e.fe.DiskNumBytes, e.start - e.fe.Offset}, true
}

// refDeltas is the net reference change of replacing the items del by
// add: one count per item. A split extent keeps its pos (the remnant
// after a cut moves its offset field by as much as its key), so cutting
// the middle out of an item nets +1 on the same reference.
func refDeltas(del, add []extent) map[dataRef]int64 {
	d := map[dataRef]int64{}
	for i := range del {
		if r, ok := refOf(&del[i]); ok {
			d[r]--
		}
	}
	for i := range add {
		if r, ok := refOf(&add[i]); ok {
			d[r]++
		}
	}
	for r, n := range d {
		if n == 0 {
			delete(d, r)
		}
	}
	return d
}

// nbytesOf is what one item adds to the inode's nbytes (format doc
// §9.3): inline extents their ram bytes, REG and PREALLOC extents their
// num_bytes, holes nothing.
func nbytesOf(e *extent) uint64 {
	switch {
	case e.fe.Type == disk.FileExtentInline:
		return e.fe.RAMBytes
	case e.fe.DiskBytenr == 0:
		return 0
	}
	return e.fe.NumBytes
}

// nbytesDelta is the change of nbytes when del is replaced by add.
func nbytesDelta(del, add []extent) int64 {
	var n int64
	for i := range del {
		n -= int64(nbytesOf(&del[i]))
	}
	for i := range add {
		n += int64(nbytesOf(&add[i]))
	}
	return n
}

// cutRange returns the items of exts (sorted, non-overlapping) that
// overlap the sector-aligned range [a, b), which must all go, and the
// remnants of them outside [a, b), which come back. Inline extents are
// never cut: callers turn them into regular extents first.
func cutRange(exts []extent, a, b uint64) (del, keep []extent) {
	for _, e := range exts {
		end := e.start + e.length
		if end <= a || e.start >= b {
			continue
		}
		del = append(del, e)
		if e.start < a {
			keep = append(keep, subExtent(e, e.start, a))
		}
		if end > b {
			keep = append(keep, subExtent(e, b, end))
		}
	}
	return del, keep
}

// subExtent is the part [lo, hi) of item e, which covers it. A hole stays
// a hole of the new length (its ram_bytes is its length, offset 0).
func subExtent(e extent, lo, hi uint64) extent {
	s := e
	s.start, s.length = lo, hi-lo
	s.fe.NumBytes = s.length
	if e.fe.IsHole() {
		s.fe.RAMBytes = s.length
	} else {
		s.fe.Offset += lo - e.start
	}
	return s
}

// holeItems returns explicit hole items (disk_bytenr 0) for the gaps of
// [a, b) that no item of exts covers: without the NO_HOLES feature every
// byte of [0, i_size) rounded up to a sector must lie in some item.
func holeItems(exts []extent, a, b uint64, gen disk.Generation) []extent {
	var out []extent
	pos := a
	for _, e := range exts {
		end := e.start + e.length
		if end <= pos {
			continue
		}
		if e.start >= b {
			break
		}
		if e.start > pos {
			out = append(out, holeExtent(pos, e.start-pos, gen))
		}
		pos = max(pos, end)
	}
	if pos < b {
		out = append(out, holeExtent(pos, b-pos, gen))
	}
	return out
}

// holeExtent is an explicit hole item covering [start, start+n).
func holeExtent(start, n uint64, gen disk.Generation) extent {
	return extent{start: start, length: n, fe: disk.FileExtentItem{Generation: gen, RAMBytes: n,
		Type: disk.FileExtentReg, NumBytes: n}}
}

// mergeSorted returns a sorted by start, assuming a and b hold
// non-overlapping items.
func mergeSorted(a, b []extent) []extent {
	out := make([]extent, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j >= len(b) || (i < len(a) && a[i].start < b[j].start) {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return out
}

// without returns exts minus the items in del (matched by start).
func without(exts, del []extent) []extent {
	gone := make(map[uint64]bool, len(del))
	for _, e := range del {
		gone[e.start] = true
	}
	var out []extent
	for _, e := range exts {
		if !gone[e.start] {
			out = append(out, e)
		}
	}
	return out
}

// shiftExtents returns the parts of exts inside [a, a+n), cut to it and
// moved to start at dst: the items a clone inserts. Holes are left out
// (the caller fills holes for filesystems without NO_HOLES).
func shiftExtents(exts []extent, a, n, dst uint64) []extent {
	var out []extent
	for _, e := range exts {
		end := e.start + e.length
		if end <= a || e.start >= a+n || e.fe.IsHole() {
			continue
		}
		s := subExtent(e, max(e.start, a), min(end, a+n))
		s.start = dst + (s.start - a)
		out = append(out, s)
	}
	return out
}

// roundUpTo rounds v up to a multiple of the power of two align.
func roundUpTo(v, align uint64) uint64 { return (v + align - 1) &^ (align - 1) }

// roundDownTo rounds v down to a multiple of the power of two align.
func roundDownTo(v, align uint64) uint64 { return v &^ (align - 1) }
