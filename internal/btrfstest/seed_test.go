package btrfstest_test

import (
	"flag"
	"testing"
	"time"
)

// seedFlag replays a randomized test: go test -run X -args -btrfstest.seed=N.
var seedFlag = flag.Int64("btrfstest.seed", 0, "seed for randomized harness tests (0: time-based)")

// testSeed returns the seed to use and logs it so any failure can be
// replayed.
func testSeed(t *testing.T) int64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -args -btrfstest.seed=%d)", seed, seed)
	return seed
}
