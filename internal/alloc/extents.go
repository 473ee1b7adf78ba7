package alloc

import (
	"fmt"
	"iter"
	"sort"
)

// Range is a half-open byte range [Start, End) of logical addresses.
type Range struct {
	Start, End uint64
}

// Len returns End - Start.
func (r Range) Len() uint64 { return r.End - r.Start }

// String prints the range as [start, end).
func (r Range) String() string { return fmt.Sprintf("[%d, %d)", r.Start, r.End) }

// Extents is an ordered set of bytes kept as disjoint, non-adjacent ranges:
// inserting a range that touches or overlaps existing ones merges them, so
// the ranges are always maximal runs (what the free-space tree records).
// Lookups are binary searches; Insert and Remove also shift the tail of a
// sorted slice, which is a memmove and cheap for the range counts of real
// block groups. The zero value is an empty set. Not safe for concurrent use.
type Extents struct {
	r []Range // sorted by Start; r[i].End < r[i+1].Start; no empty ranges
}

// Len returns the number of maximal ranges.
func (e *Extents) Len() int { return len(e.r) }

// Bytes returns the number of bytes in the set.
func (e *Extents) Bytes() uint64 {
	var n uint64
	for _, r := range e.r {
		n += r.Len()
	}
	return n
}

// All yields the ranges in ascending order. The set must not be modified
// during the iteration.
func (e *Extents) All() iter.Seq[Range] {
	return func(yield func(Range) bool) {
		for _, r := range e.r {
			if !yield(r) {
				return
			}
		}
	}
}

// Ranges returns a copy of the ranges in ascending order.
func (e *Extents) Ranges() []Range { return append([]Range(nil), e.r...) }

// Clone returns an independent copy of e.
func (e *Extents) Clone() Extents { return Extents{r: e.Ranges()} }

// Equal reports whether e and o hold the same bytes.
func (e *Extents) Equal(o *Extents) bool {
	if len(e.r) != len(o.r) {
		return false
	}
	for i := range e.r {
		if e.r[i] != o.r[i] {
			return false
		}
	}
	return true
}

// after returns the index of the first range whose End is > x, i.e. the
// first range containing x or lying entirely above it.
func (e *Extents) after(x uint64) int {
	return sort.Search(len(e.r), func(i int) bool { return e.r[i].End > x })
}

// Insert adds [start, end) to the set, merging with every range it
// overlaps or touches. An empty or inverted range is ignored.
func (e *Extents) Insert(start, end uint64) {
	if start >= end {
		return
	}
	// First range that ends at or after start (touching counts).
	i := sort.Search(len(e.r), func(i int) bool { return e.r[i].End >= start })
	j := i // j: first range starting after end (not touching)
	for j < len(e.r) && e.r[j].Start <= end {
		j++
	}
	if i < j {
		start = min(start, e.r[i].Start)
		end = max(end, e.r[j-1].End)
	}
	n := Range{start, end}
	switch {
	case i == j:
		e.r = append(e.r, Range{})
		copy(e.r[i+1:], e.r[i:])
		e.r[i] = n
	default:
		e.r[i] = n
		e.r = append(e.r[:i+1], e.r[j:]...)
	}
}

// Remove deletes [start, end) from the set, splitting a range that
// contains it. Bytes not in the set are ignored.
func (e *Extents) Remove(start, end uint64) {
	if start >= end {
		return
	}
	i := e.after(start)
	j := i
	for j < len(e.r) && e.r[j].Start < end {
		j++
	}
	if i == j {
		return
	}
	var keep []Range
	if e.r[i].Start < start {
		keep = append(keep, Range{e.r[i].Start, start})
	}
	if e.r[j-1].End > end {
		keep = append(keep, Range{end, e.r[j-1].End})
	}
	switch d := len(keep) - (j - i); {
	case d > 0: // one range split in two
		e.r = append(e.r, Range{})
		copy(e.r[j+1:], e.r[j:])
	case d < 0:
		e.r = append(e.r[:i+len(keep)], e.r[j:]...)
	}
	copy(e.r[i:], keep)
}

// Contains reports whether every byte of [start, end) is in the set. An
// empty range is contained.
func (e *Extents) Contains(start, end uint64) bool {
	if start >= end {
		return true
	}
	i := e.after(start)
	return i < len(e.r) && e.r[i].Start <= start && e.r[i].End >= end
}

// Gaps returns the parts of [start, end) that are not in the set, in
// order, looking only at the ranges that overlap it.
func (e *Extents) Gaps(start, end uint64) []Range {
	var out []Range
	for i := e.after(start); start < end; i++ {
		if i >= len(e.r) || e.r[i].Start >= end {
			out = append(out, Range{start, end})
			break
		}
		if e.r[i].Start > start {
			out = append(out, Range{start, e.r[i].Start})
		}
		start = max(start, e.r[i].End)
	}
	return out
}

// Overlaps reports whether any byte of [start, end) is in the set.
func (e *Extents) Overlaps(start, end uint64) bool {
	if start >= end {
		return false
	}
	i := e.after(start)
	return i < len(e.r) && e.r[i].Start < end
}

// Find returns the lowest start >= from, a multiple of align (0 or 1
// means any), such that [start, start+size) lies inside the set: first fit.
// ok is false when no such start exists or size is 0.
func (e *Extents) Find(size, align, from uint64) (start uint64, ok bool) {
	if size == 0 {
		return 0, false
	}
	for i := e.after(from); i < len(e.r); i++ {
		c, ok := alignUp(max(e.r[i].Start, from), align)
		if !ok {
			return 0, false
		}
		if c < e.r[i].End && e.r[i].End-c >= size {
			return c, true
		}
	}
	return 0, false
}

// alignUp rounds x up to a multiple of align; ok is false on overflow.
func alignUp(x, align uint64) (uint64, bool) {
	if align <= 1 {
		return x, true
	}
	r := x % align
	if r == 0 {
		return x, true
	}
	if x > ^uint64(0)-(align-r) {
		return 0, false
	}
	return x + align - r, true
}
