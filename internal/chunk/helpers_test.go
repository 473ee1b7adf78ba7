package chunk_test

import (
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0 = random)")

// newRand returns a seeded generator and logs the seed for -seed replay.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

const S = disk.StripeLen

// profileFlags gives the block group profile bit by name.
var profileFlags = map[string]uint64{
	"single": 0, "dup": disk.BlockGroupDUP, "raid0": disk.BlockGroupRAID0, "raid1": disk.BlockGroupRAID1,
	"raid1c3": disk.BlockGroupRAID1C3, "raid1c4": disk.BlockGroupRAID1C4, "raid10": disk.BlockGroupRAID10,
	"raid5": disk.BlockGroupRAID5, "raid6": disk.BlockGroupRAID6,
}

// mkChunk builds a data chunk item; stripe k is on devid devs[k] at
// physical offsets[k].
func mkChunk(profile string, length uint64, devs []disk.DevID, offsets []disk.PhysicalAddr) *disk.ChunkItem {
	c := &disk.ChunkItem{Length: length, Owner: 2, StripeLen: S, Type: disk.BlockGroupData | profileFlags[profile],
		IOAlign: S, IOWidth: S, SectorSize: 4096, NumStripes: uint16(len(devs)), SubStripes: 1}
	if profile == "raid10" {
		c.SubStripes = 2
	}
	for k := range devs {
		c.Stripes = append(c.Stripes, disk.Stripe{DevID: devs[k], Offset: offsets[k], DevUUID: disk.UUID{byte(devs[k])}})
	}
	return c
}
