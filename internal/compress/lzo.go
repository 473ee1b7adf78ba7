package compress

import (
	"encoding/binary"
	"sync"
)

// btrfs LZO framing (see doc.go): a 4-byte little-endian total length, then
// one segment per sector of input, each a 4-byte little-endian length and
// that many bytes of an LZO1X stream. A segment header never straddles a
// sector boundary: when fewer than 4 bytes remain in a sector after a
// segment, they are zero and the next header starts at the next sector.

// lzoHeaderLen is the size of the total-length and segment-length fields.
const lzoHeaderLen = 4

// lzoWorstCase is lzo1x_worst_compress: the largest LZO1X stream liblzo2 can
// produce for n input bytes. The kernel rejects segments longer than this
// for one sector (4419 bytes for 4 KiB sectors).
func lzoWorstCase(n int) int { return n + n/16 + 64 + 3 }

// lzoScratch pools sector-sized buffers for segments that do not fit in the
// remainder of dst, and hash tables for the encoder.
var (
	lzoScratch    sync.Pool // *[]byte
	lzoTablesPool = sync.Pool{New: func() any { return new(lzoTable) }}
)

// decompressLZO decodes btrfs-framed LZO and returns the bytes produced.
// It applies the kernel reader's checks: total length at most
// min(MaxCompressed, len(src)), round_up(total, sectorSize) >= len(src), each
// segment at most lzoWorstCase(sectorSize) bytes and decoding to at most one
// sector. Decoding stops when dst is full or the total length is reached.
func decompressLZO(dst, src []byte, sectorSize int) (int, error) {
	if len(src) < lzoHeaderLen {
		return 0, corruptf("lzo: %d bytes, too short for the length header", len(src))
	}
	total64 := uint64(binary.LittleEndian.Uint32(src))
	if total64 > uint64(min(MaxCompressed, len(src))) || total64 < lzoHeaderLen {
		return 0, corruptf("lzo: total length %d outside [%d, min(%d, extent size %d)]",
			total64, lzoHeaderLen, MaxCompressed, len(src))
	}
	total := int(total64)
	if roundUp(total, sectorSize) < len(src) {
		return 0, corruptf("lzo: total length %d leaves sectors of the %d-byte extent unused", total, len(src))
	}
	maxSeg := lzoWorstCase(sectorSize)
	pos, out := lzoHeaderLen, 0
	var scratch *[]byte
	defer func() {
		if scratch != nil {
			lzoScratch.Put(scratch)
		}
	}()
	for pos < total && out < len(dst) {
		if total-pos < lzoHeaderLen {
			return out, corruptf("lzo: segment header at offset %d runs past total length %d", pos, total)
		}
		segLen := uint64(binary.LittleEndian.Uint32(src[pos:]))
		if segLen > uint64(maxSeg) || segLen > uint64(total-pos-lzoHeaderLen) {
			return out, corruptf("lzo: segment at offset %d has length %d (limit %d, %d bytes left)",
				pos, segLen, maxSeg, total-pos-lzoHeaderLen)
		}
		pos += lzoHeaderLen
		seg := src[pos : pos+int(segLen)]
		var n int
		var err error
		if len(dst)-out >= sectorSize {
			n, err = lzo1xDecompress(dst[out:out+sectorSize], seg)
		} else {
			// The last piece of dst is shorter than a sector: decode the
			// whole segment aside and keep what fits.
			if scratch == nil {
				scratch = getLZOScratch(sectorSize)
			}
			n, err = lzo1xDecompress((*scratch)[:sectorSize], seg)
			n = copy(dst[out:], (*scratch)[:n])
		}
		if err != nil {
			return out, corruptf("lzo: segment at offset %d (output offset %d): %v", pos-lzoHeaderLen, out, err)
		}
		out += n
		pos += int(segLen)
		if left := sectorSize - pos%sectorSize; left < lzoHeaderLen {
			pos += left
		}
	}
	return out, nil
}

// getLZOScratch returns a pooled buffer of at least sectorSize bytes.
func getLZOScratch(sectorSize int) *[]byte {
	if b, _ := lzoScratch.Get().(*[]byte); b != nil && len(*b) >= sectorSize {
		return b
	}
	b := make([]byte, sectorSize)
	return &b
}

// compressLZO frames src as the kernel does: each sector compressed on its
// own, segment headers kept within one sector by zero padding after a segment
// that ends less than 4 bytes before a sector boundary. The total length
// written in the first 4 bytes includes that padding.
func compressLZO(src []byte, sectorSize int) []byte {
	nseg := (len(src) + sectorSize - 1) / sectorSize
	out := make([]byte, lzoHeaderLen, lzoHeaderLen+nseg*(lzoHeaderLen+lzoHeaderLen-1)+len(src)+len(src)/16+nseg*67)
	table := lzoTablesPool.Get().(*lzoTable)
	defer lzoTablesPool.Put(table)
	for off := 0; off < len(src); off += sectorSize {
		hdr := len(out)
		out = append(out, 0, 0, 0, 0)
		out = lzo1xCompress(out, src[off:min(off+sectorSize, len(src))], table)
		binary.LittleEndian.PutUint32(out[hdr:], uint32(len(out)-hdr-lzoHeaderLen))
		if left := sectorSize - len(out)%sectorSize; left < lzoHeaderLen {
			var zeros [lzoHeaderLen - 1]byte
			out = append(out, zeros[:left]...)
		}
	}
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}
