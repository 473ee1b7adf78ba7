package mkfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/txn"
)

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("GOBTRFS_SEED"); v != "" {
		fmt.Sscan(v, &s)
	}
	t.Logf("seed %d (replay with GOBTRFS_SEED=%d)", s, s)
	return s
}

// randomOptions picks a size between 100 MiB and 80 GiB and random
// geometry, checksum and profiles, with or without the block-group tree.
func randomOptions(rng *rand.Rand) Options {
	o := Options{
		Size:     (100<<20 + rng.Int64N(80<<30)) &^ 4095,
		NodeSize: []int{4096, 8192, 16384, 32768, 65536}[rng.IntN(5)],
		Csum:     btrfs.CsumType(rng.IntN(4)),
	}
	if rng.IntN(3) == 0 { // favour small filesystems, where the size rules bend
		o.Size = (100<<20 + rng.Int64N(3<<30)) &^ 4095
	}
	o.MetadataProfile = []string{"", "single", "dup"}[rng.IntN(3)]
	o.DataProfile = []string{"", "single", "dup"}[rng.IntN(3)]
	if rng.IntN(2) == 0 {
		// mkfs.btrfs 6.2's feature set, to compare with its images.
		o.Features = []string{"^block-group-tree"}
	}
	return o
}

// TestRandomOptions formats random option sets and checks each image
// with the transaction layer's full metadata verification and, where
// btrfs-progs is installed, with btrfs check and against mkfs.btrfs's
// dump-tree for the same options. GOBTRFS_LONG=1 runs 60 sets.
func TestRandomOptions(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 0))
	n := 6
	if os.Getenv("GOBTRFS_LONG") == "1" {
		n = 60
	}
	_, progsErr := exec.LookPath("mkfs.btrfs")
	for i := 0; i < n; i++ {
		o := randomOptions(rng)
		name := fmt.Sprintf("%d-n%d-%s-m%s-d%s-%dM%s", i, o.NodeSize, csumName(o.Csum), o.MetadataProfile, o.DataProfile, o.Size>>20,
			map[bool]string{true: "-bgt"}[len(o.Features) == 0])
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "fs.img")
			if err := Format(p, o); err != nil {
				t.Logf("refused: %v", err)
				if progsErr == nil && progsAccept(t, o) {
					t.Errorf("mkfs.btrfs formats what we refused")
				}
				return
			}
			tfs, err := txn.Open([]string{p})
			if err != nil {
				t.Fatalf("txn.Open: %v", err)
			}
			tfs.Close()
			if progsErr != nil {
				return
			}
			btrfstest.Check(t, []string{p}, false)
			btrfstest.CheckNewer(t, p, false)
			if len(o.Features) > 0 { // mkfs.btrfs 6.2 cannot make the block-group tree
				compareWithProgs(t, p, o)
			}
		})
	}
}

// progsFormat runs mkfs.btrfs with o's options on a new sparse image and
// returns its path, or "" when mkfs.btrfs refuses.
func progsFormat(t *testing.T, o Options) string {
	t.Helper()
	ref := filepath.Join(t.TempDir(), "ref.img")
	if err := os.WriteFile(ref, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(ref, o.Size); err != nil {
		t.Fatal(err)
	}
	args := []string{"-q", "-f", "-n", strconv.Itoa(o.NodeSize), "--csum", csumName(o.Csum)}
	if o.MetadataProfile != "" {
		args = append(args, "-m", o.MetadataProfile)
	}
	if o.DataProfile != "" {
		args = append(args, "-d", o.DataProfile)
	}
	if out, err := exec.Command("mkfs.btrfs", append(args, ref)...).CombinedOutput(); err != nil {
		t.Logf("mkfs.btrfs refuses: %v: %s", err, out)
		return ""
	}
	return ref
}

func progsAccept(t *testing.T, o Options) bool { return progsFormat(t, o) != "" }

// compareWithProgs formats a second image with mkfs.btrfs and the same
// options and compares the normalized dumps, free-space tree aside.
func compareWithProgs(t *testing.T, ours string, o Options) {
	t.Helper()
	ref := progsFormat(t, o)
	if ref == "" {
		return // we are more lenient about small sizes than progs
	}
	want, _ := normalizedDump(t, ref)
	got, _ := normalizedDump(t, ours)
	want = append(want, normalizedSuper(t, ref)...)
	got = append(got, normalizedSuper(t, ours)...)
	for _, d := range lineDiff(want, got) {
		t.Errorf("differs from mkfs.btrfs (- mkfs, + ours): %s", d)
	}
}
