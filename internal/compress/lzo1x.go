package compress

import (
	"encoding/binary"
	"errors"
)

// This file decodes raw LZO1X streams (the format produced by liblzo2's
// lzo1x_1_compress and read by the kernel's lzo1x_decompress_safe). It was
// written from the published description of the stream, summarised here.
//
// A stream is a sequence of instructions. How an instruction byte t below 16
// is read depends on a state: how many literals the previous instruction
// copied (0, 1..3, or 4 meaning "four or more").
//
//	first byte 18..255   copy t-17 literals; state = min(t-17, 4)
//	0000LLLL (state 0)   literal run of 3+L bytes (L==0: 18 + zero-run extension)
//	0000DDSS HHHHHHHH    state 1..3: 2-byte match, distance (H<<2)+D+1
//	                     state 4:    3-byte match, distance (H<<2)+D+2049
//	0001HLLL + LE16      length 2+L (L==0: 9 + ext), distance 16384+(H<<14)+(LE16>>2);
//	                     distance exactly 16384 is the end marker (0x11 0x00 0x00)
//	001LLLLL + LE16      length 2+L (L==0: 33 + ext), distance (LE16>>2)+1
//	01LDDDSS HHHHHHHH    length 3+L, distance (H<<3)+D+1
//	1LLDDDSS HHHHHHHH    length 5+L, distance (H<<3)+D+1
//
// Every match instruction carries two more bits S (the low bits of the byte
// holding them): the number of literals (0..3) that follow it, which becomes
// the next state. A length "extension" is a run of zero bytes, each worth 255,
// ended by a non-zero byte added to the base.

// Errors of the raw LZO1X decoder. Callers wrap them with ErrCorrupt and the
// position of the segment, so they are plain values here.
var (
	errLZOInputOverrun  = errors.New("lzo1x: stream ends inside an instruction")
	errLZOOutputOverrun = errors.New("lzo1x: output exceeds the space allowed")
	errLZOLookbehind    = errors.New("lzo1x: match distance reaches before the start of the output")
	errLZOEndMarker     = errors.New("lzo1x: malformed end marker")
	errLZOTrailing      = errors.New("lzo1x: bytes after the end marker")
)

// lzo1xDecompress decodes the complete LZO1X stream src into dst and returns
// the number of bytes produced. dst's length is the most the stream may
// produce. Like lzo1x_decompress_safe in the kernel, it requires the end
// marker to be exactly 0x11 0x00 0x00 and to be the last bytes of src. All
// reads and writes are bounds-checked; work is linear in len(src)+len(dst).
func lzo1xDecompress(dst, src []byte) (int, error) {
	if len(src) == 0 {
		return 0, errLZOInputOverrun
	}
	ip, op, state := 0, 0, 0
	if src[0] > 17 {
		n := int(src[0]) - 17
		var err error
		if op, ip, err = lzoCopyLiterals(dst, src, 0, 1, n); err != nil {
			return op, err
		}
		state = min(n, 4)
	}
	for {
		if ip >= len(src) {
			return op, errLZOInputOverrun
		}
		t := int(src[ip])
		ip++
		var length, dist, next int
		switch {
		case t < 16 && state == 0:
			// Literal run.
			n := t
			if n == 0 {
				ext, err := lzoReadExt(src, &ip)
				if err != nil {
					return op, err
				}
				n = 15 + ext
			}
			var err error
			if op, ip, err = lzoCopyLiterals(dst, src, op, ip, n+3); err != nil {
				return op, err
			}
			state = 4
			continue
		case t < 16:
			// Short match whose meaning depends on the literals just copied.
			if ip >= len(src) {
				return op, errLZOInputOverrun
			}
			dist = (t>>2)&3 + int(src[ip])<<2 + 1
			ip++
			length = 2
			if state == 4 {
				dist += 2048
				length = 3
			}
			next = t & 3
		case t < 64:
			var end bool
			var err error
			if length, dist, next, ip, end, err = lzoLongMatch(src, ip, t); err != nil {
				return op, err
			}
			if end {
				if length != 3 {
					return op, errLZOEndMarker
				}
				if ip != len(src) {
					return op, errLZOTrailing
				}
				return op, nil
			}
		default:
			if ip >= len(src) {
				return op, errLZOInputOverrun
			}
			if t < 128 {
				length = 3 + (t>>5)&1
			} else {
				length = 5 + (t>>5)&3
			}
			dist = (t>>2)&7 + int(src[ip])<<3 + 1
			ip++
			next = t & 3
		}
		var err error
		if op, err = lzoCopyMatch(dst, op, dist, length); err != nil {
			return op, err
		}
		if op, ip, err = lzoCopyLiterals(dst, src, op, ip, next); err != nil {
			return op, err
		}
		state = next
	}
}

// lzoLongMatch decodes the rest of an M4 (t 16..31) or M3 (t 32..63)
// instruction starting at src[ip], after its first byte t. end reports the
// end marker: an M4 with distance exactly 16384.
func lzoLongMatch(src []byte, ip, t int) (length, dist, next, nip int, end bool, err error) {
	field := 31
	if t < 32 {
		field = 7
	}
	if length, err = lzoMatchLen(src, &ip, t&field, field); err != nil {
		return 0, 0, 0, ip, false, err
	}
	if len(src)-ip < 2 {
		return 0, 0, 0, ip, false, errLZOInputOverrun
	}
	v := int(src[ip]) | int(src[ip+1])<<8
	ip += 2
	if t >= 32 {
		return length, v>>2 + 1, v & 3, ip, false, nil
	}
	dist = 16384 + (t&8)<<11 + v>>2
	return length, dist, v & 3, ip, dist == 16384, nil
}

// lzoMatchLen returns 2 + the length field l of a match instruction, where a
// zero field means base plus an extension that follows.
func lzoMatchLen(src []byte, ip *int, l, base int) (int, error) {
	if l != 0 {
		return 2 + l, nil
	}
	ext, err := lzoReadExt(src, ip)
	if err != nil {
		return 0, err
	}
	return 2 + base + ext, nil
}

// lzoReadExt reads a length extension: zero bytes worth 255 each, ended by a
// non-zero byte. The value is bounded by 255*len(src), so it cannot overflow.
func lzoReadExt(src []byte, ip *int) (int, error) {
	n := 0
	for *ip < len(src) && src[*ip] == 0 {
		n += 255
		*ip++
	}
	if *ip >= len(src) {
		return 0, errLZOInputOverrun
	}
	n += int(src[*ip])
	*ip++
	return n, nil
}

// lzoCopyLiterals copies n bytes from src at ip to dst at op and returns the
// advanced positions. Short runs (the common case) are moved as one 8-byte
// word when both buffers have room, which may write up to 7 bytes past the
// run inside dst; later output overwrites them and Decompress clears dst
// beyond the decoded length.
func lzoCopyLiterals(dst, src []byte, op, ip, n int) (int, int, error) {
	if n <= 8 && len(src)-ip >= 8 && len(dst)-op >= 8 {
		binary.LittleEndian.PutUint64(dst[op:], binary.LittleEndian.Uint64(src[ip:]))
		return op + n, ip + n, nil
	}
	if n > len(src)-ip {
		return op, ip, errLZOInputOverrun
	}
	if n > len(dst)-op {
		return op, ip, errLZOOutputOverrun
	}
	copy(dst[op:op+n], src[ip:ip+n])
	return op + n, ip + n, nil
}

// lzoCopyMatch appends length bytes found dist bytes back in dst at op and
// returns the new output position. An overlapping match (dist < length)
// repeats the pattern, as LZ77 requires; it is copied in doubling chunks,
// each reading only bytes already written.
func lzoCopyMatch(dst []byte, op, dist, length int) (int, error) {
	if dist > op {
		return op, errLZOLookbehind
	}
	if length > len(dst)-op {
		return op, errLZOOutputOverrun
	}
	from, end := op-dist, op+length
	if dist >= 8 && length <= 16 && len(dst)-op >= 16 {
		// Short match: two word copies (the second may read bytes the
		// first just wrote, which is what the match means). Bytes past
		// end are scratch, as in lzoCopyLiterals.
		binary.LittleEndian.PutUint64(dst[op:], binary.LittleEndian.Uint64(dst[from:]))
		binary.LittleEndian.PutUint64(dst[op+8:], binary.LittleEndian.Uint64(dst[from+8:]))
		return end, nil
	}
	for op < end {
		op += copy(dst[op:end], dst[from:op])
	}
	return end, nil
}
