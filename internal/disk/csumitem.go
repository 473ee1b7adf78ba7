package disk

// An EXTENT_CSUM item, key (EXTENT_CSUM -10, EXTENT_CSUM, logical start),
// holds the checksums of consecutive data sectors starting at the key
// offset, csum-size bytes each, with nothing else in the item. These
// helpers return views into the item, not copies.

// CsumItem is the payload of an EXTENT_CSUM item: the packed sums.
type CsumItem []byte

// Decode copies the sums of b.
func (c *CsumItem) Decode(b []byte) error {
	*c = cloneTight(b)
	return nil
}

// Size is the item size.
func (c *CsumItem) Size() int { return len(*c) }

// Encode writes the sums into b.
func (c *CsumItem) Encode(b []byte) { copy(b[:len(*c)], *c) }

// CsumItemSums splits an EXTENT_CSUM payload into per-sector sums (views of
// data). The payload size must be a multiple of csumSize.
func CsumItemSums(data []byte, csumSize int) ([][]byte, error) {
	if csumSize <= 0 || len(data)%csumSize != 0 {
		return nil, Corruptf("csum item of %d bytes is not a multiple of csum size %d", len(data), csumSize)
	}
	sums := make([][]byte, len(data)/csumSize)
	for i := range sums {
		sums[i] = data[i*csumSize : (i+1)*csumSize : (i+1)*csumSize]
	}
	return sums, nil
}

// CsumItemEnd is the logical address just past the last sector a csum item
// of itemSize bytes starting at start covers. ok is false on overflow or a
// bad csumSize.
func CsumItemEnd(start uint64, itemSize, csumSize int, sectorSize uint32) (end uint64, ok bool) {
	if csumSize <= 0 || itemSize < 0 {
		return 0, false
	}
	n := uint64(itemSize/csumSize) * uint64(sectorSize)
	end = start + n
	return end, end >= start
}

// CsumItemLookup returns the sum of the sector at logical inside the csum
// item with key offset start and payload data, or false if the item does not
// cover it.
func CsumItemLookup(start uint64, data []byte, csumSize int, sectorSize uint32, logical uint64) ([]byte, bool) {
	if csumSize <= 0 || sectorSize == 0 || logical < start || (logical-start)%uint64(sectorSize) != 0 {
		return nil, false
	}
	i := (logical - start) / uint64(sectorSize)
	if i >= uint64(len(data)/csumSize) {
		return nil, false
	}
	off := int(i) * csumSize
	return data[off : off+csumSize : off+csumSize], true
}
