package blockdev_test

import (
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0 = random)")

// newRand returns a seeded generator and logs the seed so a failure can be
// replayed with -seed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// testSuper describes a superblock to build.
type testSuper struct {
	fsid  disk.UUID
	devid disk.DevID
	dev   disk.UUID
	gen   disk.Generation
	csum  disk.CsumType
	size  uint64 // dev_item total_bytes; 0 means 2 MiB
}

// encode builds a valid superblock for copy i.
func (ts testSuper) encode(i int) []byte {
	s := disk.Superblock{
		FSID: ts.fsid, Bytenr: disk.SuperblockOffsetOf(i), Flags: disk.SuperFlagWritten,
		Magic: disk.Magic, Generation: ts.gen, Root: 0x1d4000, ChunkRoot: 0x1500000,
		TotalBytes: 1 << 30, BytesUsed: 1 << 20, RootDirObjectID: 6, NumDevices: 2,
		SectorSize: 4096, NodeSize: 16384, LeafSize: 16384, StripeSize: 4096,
		ChunkRootGeneration: ts.gen, IncompatFlags: 0x341, CsumType: ts.csum,
	}
	if ts.size == 0 {
		ts.size = 2 << 20
	}
	s.DevItem = disk.DevItem{DevID: ts.devid, TotalBytes: ts.size, SectorSize: 4096, UUID: ts.dev, FSID: ts.fsid}
	c := disk.ChunkItem{Length: 8 << 20, Owner: 2, StripeLen: disk.StripeLen, Type: disk.BlockGroupSystem | disk.BlockGroupDUP,
		IOAlign: disk.StripeLen, IOWidth: disk.StripeLen, SectorSize: 4096, NumStripes: 2, SubStripes: 1,
		Stripes: []disk.Stripe{{DevID: ts.devid, Offset: 1 << 20}, {DevID: ts.devid, Offset: 9 << 20}}}
	disk.Key{ObjectID: 256, Type: disk.ChunkItemKey, Offset: 0x1500000}.Encode(s.SysChunkArray[:])
	c.Encode(s.SysChunkArray[disk.KeySize:])
	s.SysChunkArraySize = uint32(disk.KeySize + c.Size())
	b := make([]byte, disk.SuperblockSize)
	s.Encode(b)
	ts.csum.SumBlock(b)
	return b
}

// writeSupers writes every copy that fits on d.
func (ts testSuper) writeSupers(t testing.TB, d blockdev.Device) {
	t.Helper()
	for i := range disk.SuperMirrorMax {
		off := int64(disk.SuperblockOffsetOf(i))
		if off+disk.SuperblockSize > d.Size() {
			continue
		}
		if _, err := d.WriteAt(ts.encode(i), off); err != nil {
			t.Fatal(err)
		}
	}
}

// newRandSeed returns a generator for a seed derived from a logged one.
func newRandSeed(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
