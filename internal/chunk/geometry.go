package chunk

import (
	"slices"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// StripeSizeOnDevice returns the bytes each stripe of a chunk item occupies
// on its device (the DEV_EXTENT length): the chunk length for SINGLE, DUP
// and RAID1*, length/n for RAID0, length/(n/sub) for RAID10, length/(n-1)
// for RAID5 and length/(n-2) for RAID6. It returns 0 for an item whose
// profile or stripe count makes no sense.
func StripeSizeOnDevice(c *disk.ChunkItem) uint64 {
	prof, ok := ProfileOf(c.Type)
	n := len(c.Stripes)
	if !ok || n == 0 {
		return 0
	}
	d := 1
	switch {
	case prof.Mirrored():
	case prof == RAID10:
		if c.SubStripes == 0 {
			return 0
		}
		d = n / int(c.SubStripes)
	default:
		d = n - prof.Parity()
	}
	if d <= 0 {
		return 0
	}
	return c.Length / uint64(d)
}

// DevExtent is the device range one stripe of a chunk occupies: what the
// dev tree must hold as a DEV_EXTENT keyed (DevID, DEV_EXTENT, Physical).
type DevExtent struct {
	DevID    disk.DevID
	Physical disk.PhysicalAddr
	Length   uint64
	Stripe   int // index in the chunk's stripe array
}

// DevExtents lists the dev extents the chunk implies, one per stripe in
// stripe order (DUP gives two on the same device).
func (c *Chunk) DevExtents() []DevExtent {
	out := make([]DevExtent, len(c.item.Stripes))
	for k, s := range c.item.Stripes {
		out[k] = DevExtent{DevID: s.DevID, Physical: s.Offset, Length: c.stripeSize, Stripe: k}
	}
	return out
}

// Range is a half-open range of logical addresses [Start, Start+Length).
type Range struct {
	Start  disk.LogicalAddr
	Length uint64
}

// End is the first address after the range.
func (r Range) End() disk.LogicalAddr { return r.Start + disk.LogicalAddr(r.Length) }

// Rmap returns the logical addresses whose data lives at physical offset
// phys of device devid in this chunk (several for DUP when both stripes
// cover it). Parity bytes of RAID5/6 map to no logical address.
func (c *Chunk) Rmap(devid disk.DevID, phys disk.PhysicalAddr) []disk.LogicalAddr {
	var out []disk.LogicalAddr
	for k, s := range c.item.Stripes {
		if s.DevID != devid || phys < s.Offset || uint64(phys-s.Offset) >= c.stripeSize {
			continue
		}
		rel := uint64(phys - s.Offset)
		nr, ok := c.elementOf(k, rel/stripeLen)
		if !ok {
			continue
		}
		l := c.logical + disk.LogicalAddr(nr*stripeLen+rel%stripeLen)
		if c.Contains(l) && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// elementOf returns the logical stripe-element number held by stripe k in
// device row row, or false if that place holds parity. For mirrored
// profiles the element number is the row itself.
func (c *Chunk) elementOf(k int, row uint64) (uint64, bool) {
	n := uint64(len(c.item.Stripes))
	switch {
	case c.profile.Mirrored():
		return row, true
	case c.profile == RAID0:
		return row*n + uint64(k), true
	case c.profile == RAID10:
		sub := uint64(c.item.SubStripes)
		return row*(n/sub) + uint64(k)/sub, true
	}
	d := uint64(c.data)
	j := (uint64(k) + n - row%n) % n // data column of stripe k in this row
	if j >= d {
		return 0, false
	}
	return row*d + j, true
}

// superReserved is the logical range below which a block group must not
// allocate (the kernel excludes [0, 64 KiB) where the primary superblock
// would sit on a single identity-mapped device).
const superReserved = disk.SuperblockOffset

// SuperblockExclusions returns, sorted and merged, the logical ranges of the
// chunk that an allocator must never use because they map onto a superblock
// copy on some device, plus any part of the chunk below logical 64 KiB.
// Each hit excludes the stripe element holding the copy (64 KiB), or for
// RAID5/6 the whole row (data stripes x 64 KiB), since writing anywhere in
// the row rewrites its parity. Ranges are clipped to the chunk. All three
// copy positions are considered; one beyond a device's end is simply not
// covered by any stripe.
func (c *Chunk) SuperblockExclusions() []Range {
	var out []Range
	add := func(start disk.LogicalAddr, length uint64) {
		lo, hi := max(start, c.logical), min(start+disk.LogicalAddr(length), c.End())
		if lo < hi {
			out = append(out, Range{Start: lo, Length: uint64(hi - lo)})
		}
	}
	if c.logical < superReserved {
		add(c.logical, uint64(superReserved-c.logical))
	}
	for i := range disk.SuperMirrorMax {
		bytenr := disk.SuperblockOffsetOf(i)
		for k, s := range c.item.Stripes {
			if bytenr < s.Offset || uint64(bytenr-s.Offset) >= c.stripeSize {
				continue
			}
			rel := uint64(bytenr - s.Offset)
			row, in := rel/stripeLen, rel%stripeLen
			if c.profile.Parity() > 0 {
				rowLen := uint64(c.data) * stripeLen
				add(c.logical+disk.LogicalAddr(row*rowLen+in), rowLen)
				continue
			}
			nr, _ := c.elementOf(k, row)
			add(c.logical+disk.LogicalAddr(nr*stripeLen+in), stripeLen)
		}
	}
	return mergeRanges(out)
}

// mergeRanges sorts ranges and joins overlapping or touching ones.
func mergeRanges(rs []Range) []Range {
	slices.SortFunc(rs, func(a, b Range) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	var out []Range
	for _, r := range rs {
		if len(out) > 0 && r.Start <= out[len(out)-1].End() {
			last := &out[len(out)-1]
			if r.End() > last.End() {
				last.Length = uint64(r.End() - last.Start)
			}
			continue
		}
		out = append(out, r)
	}
	return out
}
