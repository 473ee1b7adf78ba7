package alloc_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// fragment writes n small files into dir and deletes every other one, so
// the kernel's free-space tree gets many runs (and switches to bitmaps),
// plus a few big files spanning many extents.
func fragment(t *testing.T, dir string, seed uint64, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	d := filepath.Join(dir, "frag")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for i := range n {
		size := 4096 * (1 + rng.IntN(3))
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), buf[:size], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 2 {
		if err := os.Remove(filepath.Join(d, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint("big", i)), buf[:(i+1)<<21+4096*i], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKernelImages checks the model against what mkfs.btrfs and the kernel
// wrote: mkfs-only images, then after populating through a loop mount.
func TestKernelImages(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	cases := []struct {
		name string
		opts btrfstest.MkfsOptions
	}{
		{"default", btrfstest.MkfsOptions{}},
		{"4k-nodes", btrfstest.MkfsOptions{NodeSize: 4096}},
		{"64k-nodes", btrfstest.MkfsOptions{NodeSize: 65536}},
		{"dup-data", btrfstest.MkfsOptions{DataProfile: "dup"}},
		{"1g-single-meta", btrfstest.MkfsOptions{Size: 1 << 30, MetadataProfile: "single"}},
		{"mixed", btrfstest.MkfsOptions{Features: "mixed-bg", NodeSize: 4096}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			img := btrfstest.Mkfs(t, tc.opts)
			im := loadImage(t, img)
			im.checkAccounting(t)
			mnt := btrfstest.Mount(t, "", img)
			btrfstest.PopulateFiles(t, mnt, int64(seed))
			fragment(t, mnt, seed, 3000)
			btrfstest.Unmount(t, mnt)
			im = loadImage(t, img)
			im.checkAccounting(t)
			bitmaps := 0
			for _, fg := range im.fst.Groups {
				if fg.Info.Flags&disk.FreeSpaceUsingBitmaps != 0 {
					bitmaps++
				}
			}
			t.Logf("%d groups, %d using bitmaps", len(im.space.Groups()), bitmaps)
			im.exercise(t, seed, 5000)
			im = loadImage(t, img)
			ns := uint64(im.sb.NodeSize)
			if tc.opts.Features != "mixed-bg" {
				im.fill(t, disk.BlockGroupMetadata, ns, ns)
			}
			im.fill(t, disk.BlockGroupData, 1<<20, 0)
		})
	}
}
