package chunk_test

import (
	"slices"
	"testing"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

func TestStripeSizeOnDevice(t *testing.T) {
	for _, tc := range []struct {
		profile string
		n       int
		length  uint64
		want    uint64
	}{
		{"single", 1, 8 << 20, 8 << 20},
		{"dup", 2, 32 << 20, 32 << 20},
		{"raid1", 2, 1 << 30, 1 << 30},
		{"raid1c3", 3, 1 << 30, 1 << 30},
		{"raid1c4", 4, 1 << 30, 1 << 30},
		{"raid0", 3, 3 << 30, 1 << 30},
		{"raid10", 4, 2 << 30, 1 << 30},
		{"raid10", 6, 3 << 30, 1 << 30},
		{"raid5", 3, 2 << 30, 1 << 30},
		{"raid6", 4, 214695936, 107347968}, // observed on a kernel-made image
		{"raid6", 5, 3 << 30, 1 << 30},
	} {
		devs := make([]disk.DevID, tc.n)
		offs := make([]disk.PhysicalAddr, tc.n)
		for k := range devs {
			devs[k], offs[k] = disk.DevID(k+1), 1<<20
		}
		it := mkChunk(tc.profile, tc.length, devs, offs)
		if got := chunk.StripeSizeOnDevice(it); got != tc.want {
			t.Errorf("%s/%d: %d, want %d", tc.profile, tc.n, got, tc.want)
		}
		c, err := chunk.New(1<<30, it, 4096)
		if err != nil {
			t.Fatal(err)
		}
		exts := c.DevExtents()
		if len(exts) != tc.n || c.StripeSize() != tc.want {
			t.Fatalf("%s: %d extents, stripe size %d", tc.profile, len(exts), c.StripeSize())
		}
		for k, e := range exts {
			if e.DevID != devs[k] || e.Physical != offs[k] || e.Length != tc.want || e.Stripe != k {
				t.Errorf("%s extent %d: %+v", tc.profile, k, e)
			}
		}
	}
	if got := chunk.StripeSizeOnDevice(&disk.ChunkItem{Length: 1, Type: disk.BlockGroupRAID6}); got != 0 {
		t.Errorf("stripe size of a stripeless RAID6 item: %d", got)
	}
}

func TestSuperblockExclusions(t *testing.T) {
	// mkfs.btrfs 6.2, 256 MiB image: METADATA DUP 32 MiB at 30408704 with
	// stripes at physical 37 MiB and 69 MiB; the 64 MiB mirror lies in
	// stripe 0 and the kernel excludes logical 58720256 + 64 KiB.
	meta := mkChunk("dup", 32<<20, []disk.DevID{1, 1}, []disk.PhysicalAddr{37 << 20, 69 << 20})
	c, err := chunk.New(30408704, meta, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.SuperblockExclusions(); !slices.Equal(got, []chunk.Range{{Start: 58720256, Length: S}}) {
		t.Fatalf("DUP exclusions %v", got)
	}
	// A single chunk identity-mapped from 0 on one device: [0, 64K) is
	// excluded as below-64K, the primary copy at 64K and the 64M copy too.
	id, _ := chunk.New(0, mkChunk("single", 128<<20, []disk.DevID{1}, []disk.PhysicalAddr{0}), 4096)
	want := []chunk.Range{{Start: 0, Length: 2 * S}, {Start: 64 << 20, Length: S}}
	if got := id.SuperblockExclusions(); !slices.Equal(got, want) {
		t.Fatalf("identity exclusions %v, want %v", got, want)
	}
	// RAID0 on 2 devices, stripes at 60 MiB: the 64 MiB copy is 4 MiB into
	// each stripe, row 64; on stripe 0 element 128, on stripe 1 element 129.
	r0, _ := chunk.New(1<<30, mkChunk("raid0", 64<<20, []disk.DevID{1, 2}, []disk.PhysicalAddr{60 << 20, 60 << 20}), 4096)
	want = []chunk.Range{{Start: 1<<30 + 128*S, Length: 2 * S}}
	if got := r0.SuperblockExclusions(); !slices.Equal(got, want) {
		t.Fatalf("raid0 exclusions %v, want %v", got, want)
	}
	// RAID5 on 3, stripes at 60 MiB: row 64 is excluded whole (2 x 64K).
	r5, _ := chunk.New(1<<30, mkChunk("raid5", 64<<20, []disk.DevID{1, 2, 3}, []disk.PhysicalAddr{60 << 20, 60 << 20, 60 << 20}), 4096)
	want = []chunk.Range{{Start: 1<<30 + 64*2*S, Length: 2 * S}}
	if got := r5.SuperblockExclusions(); !slices.Equal(got, want) {
		t.Fatalf("raid5 exclusions %v, want %v", got, want)
	}
	// Far from every copy: nothing.
	far, _ := chunk.New(1<<30, mkChunk("raid1", 8<<20, []disk.DevID{1, 2}, []disk.PhysicalAddr{1 << 30, 2 << 30}), 4096)
	if got := far.SuperblockExclusions(); len(got) != 0 {
		t.Fatalf("exclusions %v", got)
	}
}

// TestRmapRoundTrip maps random addresses forward and back.
func TestRmapRoundTrip(t *testing.T) {
	rng := newRand(t)
	for profile, n := range map[string]int{"single": 1, "dup": 2, "raid0": 3, "raid1": 2, "raid1c3": 3,
		"raid10": 6, "raid5": 4, "raid6": 5} {
		devs := make([]disk.DevID, n)
		offs := make([]disk.PhysicalAddr, n)
		for k := range devs {
			devs[k], offs[k] = disk.DevID(k+1), disk.PhysicalAddr(1<<20+k*(40<<20))
			if profile == "dup" {
				devs[k] = 1
			}
		}
		c, err := chunk.New(5<<30, mkChunk(profile, 60*S, devs, offs), 4096)
		if err != nil {
			t.Fatal(err)
		}
		var mp chunk.Mapping
		for range 200 {
			l := c.Logical() + disk.LogicalAddr(rng.Uint64N(c.Length()))
			c.MapRange(l, 1, &mp)
			for _, cp := range mp.Copies {
				if back := c.Rmap(cp.DevID, cp.Physical); !slices.Contains(back, l) {
					t.Fatalf("%s: %d -> %v -> %v", profile, l, cp, back)
				}
			}
			for _, par := range []chunk.Location{mp.P, mp.Q} {
				if par.Stripe >= 0 && len(c.Rmap(par.DevID, par.Physical)) != 0 {
					t.Fatalf("%s: parity at %v maps back to data", profile, par)
				}
			}
		}
	}
}
