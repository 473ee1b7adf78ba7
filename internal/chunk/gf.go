package chunk

import (
	"crypto/subtle"
	"encoding/binary"
)

// GF(2^8) arithmetic for RAID6, with the polynomial x^8+x^4+x^3+x^2+1
// (0x11D) and generator g = 2, as the Linux RAID-6 code uses: Q is the sum
// over data columns j of g^j * D_j.

// gfExp[i] = g^i for 0 <= i < 510 (doubled so sums of logs need no modulo);
// gfLog[x] = i with g^i = x for x != 0; gfMul[a][b] = a*b.
var (
	gfExp [510]byte
	gfLog [256]int
	gfMul [256][256]byte
)

func init() {
	x := 1
	for i := range 255 {
		gfExp[i], gfExp[i+255] = byte(x), byte(x)
		gfLog[x] = i
		x <<= 1
		if x&0x100 != 0 {
			x ^= 0x11d
		}
	}
	for a := 1; a < 256; a++ {
		for b := 1; b < 256; b++ {
			gfMul[a][b] = gfExp[gfLog[a]+gfLog[b]]
		}
	}
}

// gfPow returns g^i; the multiplicative group has order 255.
func gfPow(i int) byte { return gfExp[i%255] }

// gfInv returns the inverse of a non-zero x.
func gfInv(x byte) byte { return gfExp[255-gfLog[x]] }

// xorInto sets dst ^= src (equal lengths).
func xorInto(dst, src []byte) { subtle.XORBytes(dst, dst, src) }

// mul2 multiplies every byte of b by g = 2 in place, eight bytes at a time:
// shift each byte left and reduce the bytes whose top bit fell out.
func mul2(b []byte) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], mul2Word(binary.LittleEndian.Uint64(b[i:])))
	}
	for ; i < len(b); i++ {
		b[i] = gfMul[2][b[i]]
	}
}

// mul2Xor sets h = h*2 ^ x (equal lengths): one Horner step of Q.
func mul2Xor(h, x []byte) {
	i := 0
	for ; i+8 <= len(h); i += 8 {
		v := mul2Word(binary.LittleEndian.Uint64(h[i:])) ^ binary.LittleEndian.Uint64(x[i:])
		binary.LittleEndian.PutUint64(h[i:], v)
	}
	for ; i < len(h); i++ {
		h[i] = gfMul[2][h[i]] ^ x[i]
	}
}

// mul2Word multiplies each of the eight bytes of v by 2.
func mul2Word(v uint64) uint64 {
	const hi, lo = 0x8080808080808080, 0x7f7f7f7f7f7f7f7f
	top := (v & hi) >> 7 // 1 in each byte whose top bit is set
	return (v&lo)<<1 ^ top*0x1d
}

// mulInto sets dst = c * src (equal lengths).
func mulInto(dst []byte, c byte, src []byte) {
	t := &gfMul[c]
	for i, v := range src {
		dst[i] = t[v]
	}
}
