package compress

import "encoding/binary"

// This file encodes raw LZO1X streams with a greedy single-probe hash matcher,
// in the spirit of LZO1X-1 (fast, modest ratio). Its output is not
// byte-identical to liblzo2's, but uses only instructions every LZO1X
// decoder accepts (see lzo1x.go for the format):
//
//   - the first literal run uses the "first byte 18..255" form when it is at
//     most 238 bytes, else a 0000LLLL run (state is 0 at the start);
//   - after a match, 1..3 literals ride in the match's S bits, and longer runs
//     use S=0 followed by a 0000LLLL run;
//   - matches are at least 4 bytes and use the 2-byte form (M2) when
//     length <= 8 and distance <= 2048, else the 3-byte M3 form up to distance
//     16384, else M4 up to distance 49151. The state-dependent short forms
//     (M1) are never produced, which keeps the state reasoning trivial.
//
// Output bound: a literal run costs at most 2 + L/255 header bytes and a
// match of m >= 4 bytes at most 3 + m/255, so each (run, match) pair adds at
// most one byte per 23 input bytes plus L/255: under n + n/21 + 5 in total,
// inside the n + n/16 + 64 + 3 the kernel's reader allows for a segment.

const (
	lzoHashBits = 14
	lzoMinMatch = 4
	// lzoMaxDist is the farthest an M4 match can reach: 16384 + (1<<14) + 0x3fff.
	lzoMaxDist = 49151
)

// lzoTable is the matcher's hash table of positions+1 (0 means empty). It is
// pooled by the caller; lzo1xCompress clears it.
type lzoTable [1 << lzoHashBits]int32

// lzoEncoder carries the output and the index of the byte whose low two bits
// hold the S field of the last match (-1 before any match).
type lzoEncoder struct {
	out   []byte
	sByte int
}

// lzo1xCompress appends to dst an LZO1X stream that decodes to src. src must be
// shorter than 2 GiB (callers give it one sector).
func lzo1xCompress(dst, src []byte, table *lzoTable) []byte {
	clear(table[:])
	e := lzoEncoder{out: dst, sByte: -1}
	lit := 0 // start of the pending literals
	i := 0
	for i+lzoMinMatch <= len(src) {
		v := binary.LittleEndian.Uint32(src[i:])
		h := (v * 2654435761) >> (32 - lzoHashBits)
		cand := int(table[h]) - 1
		table[h] = int32(i + 1)
		if cand < 0 || i-cand > lzoMaxDist || binary.LittleEndian.Uint32(src[cand:]) != v {
			// Skip faster through data that does not match (as LZ4 does),
			// so incompressible input costs little time.
			i += 1 + (i-lit)>>6
			continue
		}
		m := lzoMinMatch
		for i+m < len(src) && src[cand+m] == src[i+m] {
			m++
		}
		e.literals(src[lit:i])
		e.match(m, i-cand)
		i += m
		lit = i
		// Remember a position near the match end to find the next
		// repetition sooner.
		if p := i - 2; p+lzoMinMatch <= len(src) {
			w := binary.LittleEndian.Uint32(src[p:])
			table[(w*2654435761)>>(32-lzoHashBits)] = int32(p + 1)
		}
	}
	e.literals(src[lit:])
	// End marker: an M4 match of length 3 with distance 16384.
	return append(e.out, 0x11, 0x00, 0x00)
}

// literals emits a run of literal bytes in the form the current state needs.
func (e *lzoEncoder) literals(lits []byte) {
	n := len(lits)
	switch {
	case n == 0:
		return
	case e.sByte < 0 && n <= 238:
		e.out = append(e.out, byte(17+n))
	case e.sByte >= 0 && n <= 3:
		e.out[e.sByte] |= byte(n)
	case n-3 <= 15:
		e.out = append(e.out, byte(n-3))
	default:
		e.out = append(e.out, 0)
		e.ext(n - 3 - 15)
	}
	e.out = append(e.out, lits...)
}

// match emits a match of length m (>= 4) at distance d (1..lzoMaxDist) with
// S = 0; a following literals call may set S.
func (e *lzoEncoder) match(m, d int) {
	switch {
	case m <= 8 && d <= 2048:
		d--
		e.sByte = len(e.out)
		e.out = append(e.out, byte((m-1)<<5|(d&7)<<2), byte(d>>3))
		return
	case d <= 16384:
		e.lengthField(32, m-2, 31)
		d--
	default:
		d -= 16384
		e.lengthField(16|byte(d>>14)<<3, m-2, 7)
		d &= 0x3fff
	}
	e.sByte = len(e.out)
	e.out = append(e.out, byte(d<<2), byte(d>>6))
}

// lengthField emits an instruction byte op carrying l in its low bits, or
// op alone followed by an extension when l exceeds max.
func (e *lzoEncoder) lengthField(op byte, l, max int) {
	if l <= max {
		e.out = append(e.out, op|byte(l))
		return
	}
	e.out = append(e.out, op)
	e.ext(l - max)
}

// ext emits a length extension for n >= 1: zero bytes worth 255 each, then
// the non-zero remainder.
func (e *lzoEncoder) ext(n int) {
	for n > 255 {
		e.out = append(e.out, 0)
		n -= 255
	}
	e.out = append(e.out, byte(n))
}
