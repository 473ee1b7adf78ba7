package chunk

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Location is one place on one device.
type Location struct {
	Stripe   int // index in the chunk's stripe array; -1 for none
	DevID    disk.DevID
	Physical disk.PhysicalAddr
}

// String prints "devid D physical P (stripe S)".
func (l Location) String() string {
	return fmt.Sprintf("devid %d physical %d (stripe %d)", l.DevID, l.Physical, l.Stripe)
}

// noLocation marks an absent P or Q.
var noLocation = Location{Stripe: -1}

// Mapping says where a logical range lives. The range starts at Logical and
// is Length bytes long, never crossing a stripe element, so every Location
// below holds it contiguously from its Physical offset.
type Mapping struct {
	Chunk   *Chunk
	Logical disk.LogicalAddr
	Length  uint64
	// Copies are the places holding the bytes, in the order to try them:
	// every stripe for SINGLE/DUP/RAID1*, the sub-stripe group for RAID10,
	// the one stripe for RAID0 and the data column for RAID5/6.
	Copies []Location

	// The rest is set for RAID5/6 only (Chunk.Profile().Parity() > 0).

	// Row is the full-stripe row; Column the data column (0 <= Column <
	// DataStripes) holding the range.
	Row    uint64
	Column int
	// Data are all data columns of the row at the same offset within their
	// element, indexed by column (Data[Column] == Copies[0]). Rebuilding
	// column j reads the same Length bytes from the others and from P (and
	// Q): D_j = P xor the other D_i; or via Q = sum g^i D_i over GF(2^8).
	Data []Location
	// P and Q are the parity blocks of the row at the same offset; Q is
	// noLocation (Stripe -1) for RAID5, both are for other profiles.
	P, Q Location
}

// MapRange fills dst with the mapping of the range starting at logical,
// which must lie inside c. dst.Length is length cut at the end of the
// stripe element (and of the chunk); length 0 means as far as possible.
// dst's slices are reused, so a caller mapping in a loop does not allocate.
// It panics if logical is outside c (a caller bug).
func (c *Chunk) MapRange(logical disk.LogicalAddr, length uint64, dst *Mapping) {
	if !c.Contains(logical) {
		panic(fmt.Sprintf("chunk: MapRange(%d) outside %s", logical, c))
	}
	off := uint64(logical - c.logical)
	room := c.item.Length - off
	if !c.profile.Mirrored() {
		room = min(room, stripeLen-off%stripeLen)
	}
	if length == 0 || length > room {
		length = room
	}
	*dst = Mapping{Chunk: c, Logical: logical, Length: length, Copies: dst.Copies[:0], Data: dst.Data[:0], P: noLocation, Q: noLocation}
	at := func(k int, rel uint64) Location {
		s := c.item.Stripes[k]
		return Location{Stripe: k, DevID: s.DevID, Physical: s.Offset + disk.PhysicalAddr(rel)}
	}
	n := uint64(len(c.item.Stripes))
	nr, in := off/stripeLen, off%stripeLen
	switch c.profile {
	case Single, DUP, RAID1, RAID1C3, RAID1C4:
		for k := range c.item.Stripes {
			dst.Copies = append(dst.Copies, at(k, off))
		}
	case RAID0:
		dst.Copies = append(dst.Copies, at(int(nr%n), nr/n*stripeLen+in))
	case RAID10:
		sub := uint64(c.item.SubStripes)
		f := n / sub
		first := nr % f * sub
		for k := first; k < first+sub; k++ {
			dst.Copies = append(dst.Copies, at(int(k), nr/f*stripeLen+in))
		}
	case RAID5, RAID6:
		d := uint64(c.data)
		row, j := nr/d, nr%d
		rel := row*stripeLen + in
		for i := range d {
			dst.Data = append(dst.Data, at(int((row+i)%n), rel))
		}
		dst.Row, dst.Column = row, int(j)
		dst.Copies = append(dst.Copies, dst.Data[j])
		dst.P = at(int((row+d)%n), rel)
		if c.profile == RAID6 {
			dst.Q = at(int((row+d+1)%n), rel)
		}
	}
}
