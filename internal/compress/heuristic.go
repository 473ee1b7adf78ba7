package compress

import (
	"encoding/binary"
	"math/bits"
)

// The kernel's compression heuristic (btrfs_compress_heuristic), which runs
// before any compression attempt when a filesystem is mounted with
// compress=ALGO (not compress-force) or the inode has the compress flag or
// property. Its answer is observable: data it rejects is stored plain and,
// unlike a compression attempt that fails to save a sector, does not mark
// the inode NOCOMPRESS. So gobtrfs must reproduce it exactly, integer
// rounding included, rather than use any "better" estimate.
//
// It looks only at a sample: 16 bytes out of every 256 of the first 128 KiB.
// The sample is taken as yes when its two halves are equal, when it uses
// fewer than 64 byte values, or when 90% of it is covered by few enough byte
// values; as no when that core set is 200 values or more; otherwise an
// integer Shannon entropy estimate decides.
const (
	heurInterval    = 256 // distance between sample starts (SAMPLING_INTERVAL)
	heurReadSize    = 16  // bytes taken at each start (SAMPLING_READ_SIZE)
	heurMaxSample   = MaxUncompressed / heurInterval * heurReadSize
	heurByteSetMin  = 64  // fewer distinct byte values: worth it
	heurCoreSetLow  = 64  // core set index at most this: worth it
	heurCoreSetHigh = 200 // core set index at least this: not worth it
	heurEntropyHigh = 80  // entropy percentage below this: worth it
	heurCorePercent = 90  // the core set covers more than this % of the sample
)

// heurBigCount is the smallest byte count handled individually when finding
// the core set; smaller counts go through a histogram. At most
// heurMaxSample/heurBigCount (32) byte values can reach it.
const heurBigCount = 256

// Worth reports whether the Linux btrfs compression heuristic would try to
// compress b, the data of one compressed extent's worth of file (normally a
// 128 KiB piece; only the first MaxUncompressed bytes of longer input
// count).
//
// The kernel samples the page cache of a delalloc range, whose end is
// rounded up to a sector: for a file's last piece it sees zeros after EOF up
// to the sector boundary. Callers that want the kernel's answer for such a
// piece pass it zero-padded to the sector size.
//
// A sample is taken at each multiple of 256 whose 16 bytes end strictly
// before the end of b (the kernel stops once start > end-16 with an
// inclusive end), so b shorter than 17 bytes yields an empty sample. The
// kernel's repeated-pattern test then compares two empty halves and says
// yes, and so does Worth; the kernel itself never meets this case because
// its ranges are whole sectors.
//
// Worth does not allocate and reads at most 8 KiB of b.
func Worth(b []byte) bool {
	return judge(b) < verdictNo
}

// verdict says which step of the heuristic decided, for tests; the values
// below verdictNo mean "worth compressing".
type verdict uint8

const (
	verdictRepeated  verdict = iota // the sample's halves are equal
	verdictByteSet                  // fewer than 64 byte values occur
	verdictCoreLow                  // 90% covered by few values (index <= 64)
	verdictEntropy                  // entropy below 80%
	verdictNo                       // first "no": core set index >= 200
	verdictNoEntropy                // entropy 80% or more
)

// judge runs the heuristic on b and returns the deciding step.
func judge(b []byte) verdict {
	if len(b) > MaxUncompressed {
		b = b[:MaxUncompressed]
	}
	starts := 0
	if len(b) > heurReadSize {
		starts = (len(b)-heurReadSize-1)/heurInterval + 1
	}
	if repeatedHalves(b, starts) {
		return verdictRepeated
	}
	var counts [256]uint32
	countSample(&counts, b, starts)
	size := uint32(starts * heurReadSize)
	if byteSetSize(&counts) < heurByteSetMin {
		return verdictByteSet
	}
	switch k := coreSetSize(&counts, size*heurCorePercent/100); {
	case k <= heurCoreSetLow:
		return verdictCoreLow
	case k >= heurCoreSetHigh:
		return verdictNo
	}
	if entropyPercent(&counts, size) < heurEntropyHigh {
		return verdictEntropy
	}
	return verdictNoEntropy
}

// repeatedHalves reports whether the first half of the sample equals its
// second half. The sample is read as 8-byte words, two per start: word w
// lies at w/2*256 + w%2*8, and the halves are the words [0, starts) and
// [starts, 2*starts). An odd number of starts splits one start's 16 bytes
// between the halves.
func repeatedHalves(b []byte, starts int) bool {
	lo, hi := 0, starts/2*heurInterval+starts%2*8
	for range starts {
		if binary.LittleEndian.Uint64(b[lo:lo+8]) != binary.LittleEndian.Uint64(b[hi:hi+8]) {
			return false
		}
		lo, hi = nextSampleWord(lo), nextSampleWord(hi)
	}
	return true
}

// nextSampleWord returns the offset of the sample word after the one at off:
// the second half of the same start, or the first of the next start.
func nextSampleWord(off int) int {
	if off%heurInterval == 0 {
		return off + 8
	}
	return off + heurInterval - 8
}

// countSample counts the byte values of the sample into counts. Two tables,
// one for each 8-byte half of a start's 16 bytes, let increments of the same
// value proceed independently, which otherwise limits speed on data with few
// values. 16-bit counters suffice: the sample has at most 8192 bytes.
func countSample(counts *[256]uint32, b []byte, starts int) {
	var c [2][256]uint16
	for s := 0; s < starts; s++ {
		p := b[s*heurInterval : s*heurInterval+heurReadSize]
		x := binary.LittleEndian.Uint64(p[:8])
		y := binary.LittleEndian.Uint64(p[8:])
		for range 8 {
			c[0][byte(x)]++
			c[1][byte(y)]++
			x >>= 8
			y >>= 8
		}
	}
	for v := range counts {
		counts[v] = uint32(c[0][v]) + uint32(c[1][v])
	}
}

// byteSetSize returns how many byte values occur in the sample.
func byteSetSize(counts *[256]uint32) int {
	n := 0
	for _, c := range counts {
		if c != 0 {
			n++
		}
	}
	return n
}

// coreSetSize returns the kernel's core set index for a sample whose
// threshold is limit (90% of its size, rounded down). With the counts sorted
// in descending order and k the fewest of them summing to more than limit,
// the kernel first sums 64 counts and returns 64 if that is enough, then
// adds one at a time and returns the index of the count that crosses the
// limit, giving up at index 200. That is k-1 clamped to [64, 200]: an
// index, not a count, so a core set of 65 values still passes as "low".
//
// Instead of sorting 256 counts, the few counts of heurBigCount or more
// (at most 32) are sorted and the rest walked through a histogram of their
// values, highest first.
func coreSetSize(counts *[256]uint32, limit uint32) int {
	var big [heurMaxSample / heurBigCount]uint32
	var hist [heurBigCount]uint16
	nbig := 0
	for _, c := range counts {
		if c >= heurBigCount {
			big[nbig] = c
			nbig++
		} else {
			hist[c]++
		}
	}
	sortDesc(big[:nbig])
	k, sum := 0, uint32(0)
	for _, c := range big[:nbig] {
		k++
		sum += c
		if sum > limit {
			return clampCore(k)
		}
	}
	for v := uint32(heurBigCount - 1); v > 0; v-- {
		m := uint32(hist[v])
		if sum+m*v > limit {
			// The counts of value v cross the limit: take just enough.
			return clampCore(k + int((limit-sum)/v) + 1)
		}
		sum += m * v
		k += int(m)
	}
	// Only an empty sample gets here (its limit 0 is never exceeded);
	// Worth has answered before, so this is for completeness.
	return clampCore(k + 1)
}

// clampCore turns the number k of top counts needed to pass the limit into
// the index the kernel returns.
func clampCore(k int) int {
	return min(max(k-1, heurCoreSetLow), heurCoreSetHigh)
}

// sortDesc sorts a few values in descending order (insertion sort: at most
// 32 values, and usually none or one).
func sortDesc(a []uint32) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] > a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// log2w is the kernel's entropy logarithm: floor(log2(x^4)), which keeps two
// fraction bits of log2(x) in integer arithmetic. x is at most 8192, so x^4
// fits in 64 bits.
func log2w(x uint32) uint64 {
	x2 := uint64(x) * uint64(x)
	return uint64(bits.Len64(x2*x2)) - 1
}

// entropyPercent returns the sample's Shannon entropy as a percentage of 8
// bits per byte, computed in the kernel's integer steps: the sum of
// c*(log2w(size)-log2w(c)) over the counts c, divided by size, times 100,
// divided by 8*log2w(2).
func entropyPercent(counts *[256]uint32, size uint32) uint64 {
	ls := log2w(size)
	var sum uint64
	for _, c := range counts {
		if c != 0 {
			sum += uint64(c) * (ls - log2w(c))
		}
	}
	return sum / uint64(size) * 100 / (8 * log2w(2))
}
