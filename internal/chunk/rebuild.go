package chunk

import (
	"crypto/subtle"
	"errors"
)

// errTooManyLost is the attempt error when parity cannot cover the losses.
var errTooManyLost = errors.New("too many stripes lost to rebuild")

// readParity reads one RAID5/6 piece: the data column first, then rebuilds
// (see rebuild) when it is missing, unreadable or rejected.
func (r *Reader) readParity(buf []byte, mp *Mapping, verify VerifyFunc, trace func(Piece), s *scratch) error {
	direct := mp.Copies[0]
	err := r.readAt(direct, buf)
	if err == nil && verify != nil && !verify(mp.Logical, buf) {
		err = verifyError(mp.Logical, direct)
	}
	if err == nil {
		if trace != nil {
			trace(Piece{Logical: mp.Logical, Length: len(buf), Mirror: 1, From: direct})
		}
		return nil
	}
	rb := rebuild{r: r, mp: mp, buf: buf, verify: verify, trace: trace}
	rb.failed = append(rb.failed, Attempt{Location: direct, Err: err})
	rb.pacc, rb.q, rb.h, rb.tmp = s.buffers(len(buf))
	if rb.run() {
		return nil
	}
	return &ReadError{Logical: mp.Logical, Length: len(buf), Attempts: rb.failed}
}

// rebuild reconstructs data column j of one RAID5/6 piece. It reads P (and
// Q) and every other data column once, accumulating
//
//	pacc = P xor (sum of the other readable D_i)
//	h    = Q xor (sum over the other readable i of g^i D_i)   (RAID6)
//
// with Horner's rule for the g^i factors, so memory stays at four
// piece-sized buffers whatever the number of stripes. Candidates are then
// tried in order until one passes verify:
//
//	mirror 2: D_j = pacc                            (only j lost, P good)
//	mirror 3: D_j = h / g^j                         (j and P lost, Q good)
//	mirror 4: D_j from pacc and h with column k lost (j and k lost)
//	mirror 4+m: as above, assuming the m-th other column k silently bad
//
// The last kind covers a column that reads fine but holds wrong bytes,
// which only verification of the result can reveal.
type rebuild struct {
	r      *Reader
	mp     *Mapping
	buf    []byte
	verify VerifyFunc
	trace  func(Piece)
	failed []Attempt

	pacc, q, h, tmp []byte
	pOK, qOK        bool
	lost            []int // other data columns that could not be read
}

// run gathers the columns and tries the candidates; it reports success.
func (rb *rebuild) run() bool {
	raid6 := rb.mp.Chunk.profile == RAID6
	j := rb.mp.Column
	if !rb.gather(raid6) {
		rb.failed = append(rb.failed, Attempt{Location: rb.mp.Copies[0], Rebuild: true, Err: errTooManyLost})
		return false
	}
	if len(rb.lost) == 0 && rb.pOK {
		copy(rb.buf, rb.pacc)
		if rb.try(2, rb.mp.Data[j].Stripe) {
			return true
		}
	}
	if raid6 && len(rb.lost) == 0 && rb.qOK {
		mulInto(rb.buf, gfInv(gfPow(j)), rb.h)
		if rb.try(3, rb.mp.Data[j].Stripe, rb.mp.P.Stripe) {
			return true
		}
	}
	if !raid6 || !rb.pOK || !rb.qOK {
		return false
	}
	if len(rb.lost) == 1 {
		k := rb.lost[0]
		return solve2(rb.buf, j, k, rb.pacc, rb.h) && rb.try(4, rb.mp.Data[j].Stripe, rb.mp.Data[k].Stripe)
	}
	if rb.verify == nil {
		return false
	}
	// Every column read, yet P and Q rebuilds failed: suspect each other
	// column in turn. q is free now (folded into h) and serves as scratch.
	for m, k := 0, 0; k < len(rb.mp.Data); k++ {
		if k == j {
			continue
		}
		m++
		if rb.r.readAt(rb.mp.Data[k], rb.tmp) != nil {
			continue
		}
		subtle.XORBytes(rb.q, rb.pacc, rb.tmp) // D_j ^ D_k
		mulInto(rb.tmp, gfPow(k), rb.tmp)
		xorInto(rb.tmp, rb.h) // g^j D_j ^ g^k D_k
		if solve2(rb.buf, j, k, rb.q, rb.tmp) && rb.try(3+m, rb.mp.Data[j].Stripe, rb.mp.Data[k].Stripe) {
			return true
		}
	}
	return false
}

// gather reads P, Q and the other data columns into the accumulators. It
// returns false when the losses are already beyond repair.
func (rb *rebuild) gather(raid6 bool) bool {
	mp := rb.mp
	rb.pOK = rb.readInto(mp.P, rb.pacc)
	if raid6 {
		rb.qOK = rb.readInto(mp.Q, rb.q)
		clear(rb.h)
	}
	useQ := raid6 && rb.qOK
	if !rb.pOK && !useQ {
		return false
	}
	for i := len(mp.Data) - 1; i >= 0; i-- {
		if i == mp.Column {
			if useQ {
				mul2(rb.h)
			}
			continue
		}
		if !rb.readInto(mp.Data[i], rb.tmp) {
			rb.lost = append(rb.lost, i)
			if !raid6 || len(rb.lost) > 1 || !rb.pOK || !useQ {
				return false
			}
			mul2(rb.h)
			continue
		}
		if rb.pOK {
			xorInto(rb.pacc, rb.tmp)
		}
		if useQ {
			mul2Xor(rb.h, rb.tmp)
		}
	}
	if useQ {
		xorInto(rb.h, rb.q)
	}
	return true
}

// readInto reads one column, recording a failure.
func (rb *rebuild) readInto(loc Location, b []byte) bool {
	if err := rb.r.readAt(loc, b); err != nil {
		rb.failed = append(rb.failed, Attempt{Location: loc, Err: err})
		return false
	}
	return true
}

// try verifies the rebuilt bytes in rb.buf and reports the outcome.
func (rb *rebuild) try(mirror int, lost ...int) bool {
	if rb.verify != nil && !rb.verify(rb.mp.Logical, rb.buf) {
		rb.failed = append(rb.failed, Attempt{Location: rb.mp.Copies[0], Rebuild: true, Lost: lost,
			Err: verifyError(rb.mp.Logical, rb.mp.Copies[0])})
		return false
	}
	if rb.trace != nil {
		rb.trace(Piece{Logical: rb.mp.Logical, Length: len(rb.buf), Mirror: mirror, From: rb.mp.Copies[0],
			Rebuilt: true, Lost: lost, Failed: rb.failed})
	}
	return true
}

// solve2 recovers D_x into dst from a = D_x ^ D_y and b = g^x D_x ^ g^y D_y:
// D_x = (b ^ g^y a) / (g^x ^ g^y). It reports false when the two columns
// share a coefficient (only possible with more than 255 data columns).
func solve2(dst []byte, x, y int, a, b []byte) bool {
	gy := gfPow(y)
	den := gfPow(x) ^ gy
	if den == 0 {
		return false
	}
	inv, mgy := &gfMul[gfInv(den)], &gfMul[gy]
	for i := range dst {
		dst[i] = inv[b[i]^mgy[a[i]]]
	}
	return true
}

// Parity computes the P and (for RAID6, when q is not nil) Q blocks of one
// row from its data columns, all of equal length: P = XOR of the columns,
// Q = sum of g^j * data[j]. Writers use it to fill parity stripes.
func Parity(p, q []byte, data [][]byte) {
	clear(p)
	if q != nil {
		clear(q)
	}
	for j := len(data) - 1; j >= 0; j-- {
		xorInto(p, data[j])
		if q != nil {
			mul2Xor(q, data[j])
		}
	}
}
