package alloc_test

import (
	"flag"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("alloc.seed", 0, "seed for randomized alloc tests (0: GOBTRFS_ALLOC_SEED or time)")

// testSeed returns the seed for a randomized test and logs how to replay it.
func testSeed(tb testing.TB) uint64 {
	tb.Helper()
	seed := *seedFlag
	if seed == 0 {
		if s := os.Getenv("GOBTRFS_ALLOC_SEED"); s != "" {
			v, err := strconv.ParseUint(s, 0, 64)
			if err != nil {
				tb.Fatalf("GOBTRFS_ALLOC_SEED: %v", err)
			}
			seed = v
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("seed %d (replay with -alloc.seed=%d or GOBTRFS_ALLOC_SEED=%d)", seed, seed, seed)
	return seed
}
