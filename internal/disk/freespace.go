package disk

import (
	"fmt"
	"iter"
)

// FreeSpaceInfoSize is the size of struct btrfs_free_space_info.
const FreeSpaceInfoSize = 8

// FreeSpaceUsingBitmaps is the FreeSpaceInfo flag saying the group's free
// space is stored as FREE_SPACE_BITMAP items rather than FREE_SPACE_EXTENTs.
const FreeSpaceUsingBitmaps uint32 = 1 << 0

// FreeSpaceBitmapMaxBytes is the largest bitmap the kernel writes in one
// item (policy): 256 bytes, 8 MiB of 4 KiB sectors.
const FreeSpaceBitmapMaxBytes = 256

// FreeSpaceInfo is struct btrfs_free_space_info (8 bytes): key (group start,
// FREE_SPACE_INFO, group length) in the free space tree.
type FreeSpaceInfo struct {
	ExtentCount uint32 // 0x00 number of free extents (runs) in the group
	Flags       uint32 // 0x04 FreeSpaceUsingBitmaps
}

// Size returns FreeSpaceInfoSize.
func (f *FreeSpaceInfo) Size() int { return FreeSpaceInfoSize }

// Decode reads a FreeSpaceInfo from b.
func (f *FreeSpaceInfo) Decode(b []byte) error {
	if len(b) < FreeSpaceInfoSize {
		return shortErr("free space info", len(b), FreeSpaceInfoSize)
	}
	f.ExtentCount = le.Uint32(b)
	f.Flags = le.Uint32(b[4:])
	return nil
}

// Encode writes f into b.
func (f *FreeSpaceInfo) Encode(b []byte) {
	_ = b[FreeSpaceInfoSize-1]
	le.PutUint32(b, f.ExtentCount)
	le.PutUint32(b[4:], f.Flags)
}

// String prints the item as dump-tree does.
func (f *FreeSpaceInfo) String() string {
	return fmt.Sprintf("free space info extent count %d flags %d", f.ExtentCount, f.Flags)
}

// FreeSpaceBitmapSize is the payload size of a FREE_SPACE_BITMAP item whose
// key covers length bytes: one bit per sector, rounded up to whole bytes.
func FreeSpaceBitmapSize(length uint64, sectorSize uint32) uint64 {
	if sectorSize == 0 {
		return 0
	}
	bits := length / uint64(sectorSize)
	return bits/8 + min(bits%8, 1)
}

// FreeSpaceBitmap is the payload of a FREE_SPACE_BITMAP item, key (start,
// FREE_SPACE_BITMAP, length): bit i, least-significant bit of byte i/8
// first, is set when the sector at start + i*sectorsize is free.
type FreeSpaceBitmap []byte

// Decode copies the bitmap bytes of b.
func (m *FreeSpaceBitmap) Decode(b []byte) error {
	*m = cloneTight(b)
	return nil
}

// Size is the item size.
func (m *FreeSpaceBitmap) Size() int { return len(*m) }

// Encode writes the bitmap into b.
func (m *FreeSpaceBitmap) Encode(b []byte) { copy(b[:len(*m)], *m) }

// BitmapTest reports whether bit i of a free-space bitmap is set; bits past
// the end read as clear.
func BitmapTest(bitmap []byte, i uint64) bool {
	return i/8 < uint64(len(bitmap)) && bitmap[i/8]&(1<<(i%8)) != 0
}

// BitmapSet sets bits [i, i+n) of a free-space bitmap, which must hold them.
func BitmapSet(bitmap []byte, i, n uint64) {
	for ; n > 0; i, n = i+1, n-1 {
		bitmap[i/8] |= 1 << (i % 8)
	}
}

// BitmapClear clears bits [i, i+n) of a free-space bitmap, which must hold them.
func BitmapClear(bitmap []byte, i, n uint64) {
	for ; n > 0; i, n = i+1, n-1 {
		bitmap[i/8] &^= 1 << (i % 8)
	}
}

// BitmapRuns yields (first bit, bit count) for every maximal run of set bits
// among the first nbits bits of bitmap (bits past the end count as clear).
// Multiply by the sector size and add the key offset to get free ranges.
func BitmapRuns(bitmap []byte, nbits uint64) iter.Seq2[uint64, uint64] {
	nbits = min(nbits, uint64(len(bitmap))*8)
	return func(yield func(uint64, uint64) bool) {
		for i := uint64(0); i < nbits; {
			if bitmap[i/8] == 0 && i%8 == 0 {
				i += 8
				continue
			}
			if !BitmapTest(bitmap, i) {
				i++
				continue
			}
			start := i
			for i < nbits && BitmapTest(bitmap, i) {
				i++
			}
			if !yield(start, i-start) {
				return
			}
		}
	}
}
