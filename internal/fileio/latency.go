package fileio

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// latency is a histogram of request durations that every thread adds to
// without a lock: buckets are powers of two of nanoseconds, each cut into
// latencySub linear steps, so a percentile is off by at most 1/latencySub
// (3%) of its value. Keeping every duration instead would grow with the
// run and show up in the peak heap being measured.
type latency struct {
	counts [64 * latencySub]atomic.Uint64
	n      atomic.Uint64
}

const latencySub = 32

// bucket maps a duration in nanoseconds to its bucket.
func latencyBucket(ns uint64) int {
	if ns < latencySub {
		return int(ns)
	}
	e := bits.Len64(ns) - 1 // 2^e <= ns < 2^(e+1), e >= 5
	sub := (ns >> (e - 5)) & (latencySub - 1)
	return (e-4)*latencySub + int(sub)
}

// bucketMid is the middle of a bucket's range, in nanoseconds.
func latencyBucketMid(b int) float64 {
	if b < latencySub {
		return float64(b)
	}
	e := b/latencySub + 4
	sub := b % latencySub
	lo := float64(uint64(1)<<e) + float64(sub)*math.Ldexp(1, e-5)
	return lo + math.Ldexp(1, e-5)/2
}

func (l *latency) add(d time.Duration) {
	l.counts[latencyBucket(uint64(max(d, 0)))].Add(1)
	l.n.Add(1)
}

// percentile returns the duration below which a share p (0..1) of the
// requests finished, in milliseconds; 0 without requests.
func (l *latency) percentile(p float64) float64 {
	n := l.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for b := range l.counts {
		seen += l.counts[b].Load()
		if seen >= rank {
			return latencyBucketMid(b) / 1e6
		}
	}
	return 0
}

// latency returns the percentiles sysbench-style reports show.
func (l *latency) latency() Latency {
	return Latency{P50: l.percentile(0.50), P95: l.percentile(0.95), P99: l.percentile(0.99)}
}
