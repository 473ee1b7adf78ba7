package mkfs

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestBuildShrink builds images with --shrink: each holds exactly the
// input, passes btrfs check, and stays within a bound above its data
// (mkfs.btrfs 6.2 --shrink makes 141, 74 and 229 MiB of such an input).
func TestBuildShrink(t *testing.T) {
	btrfstest.RequireInterop(t)
	src := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	for i := range 40 {
		dir := filepath.Join(src, "d"+string(rune('a'+i%5)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, rng.IntN(2<<20))
		for j := range b {
			b[j] = byte(rng.IntN(256)) // incompressible
		}
		total += int64(len(b))
		if err := os.WriteFile(filepath.Join(dir, "f"+string(rune('a'+i))), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts Options
		max  int64 // bytes beyond the data's copies
	}{
		{"default", Options{}, 96 << 20},
		{"single", Options{MetadataProfile: "single"}, 48 << 20},
		{"dup-data", Options{DataProfile: "dup", NodeSize: 4096}, 140 << 20},
		{"block-group-tree", Options{Features: []string{"block-group-tree"}}, 96 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "img")
			opts := BuildOptions{Format: c.opts, PrePass: true, Shrink: true}
			if _, err := Build(img, dirOpener(src), opts); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(img)
			if err != nil {
				t.Fatal(err)
			}
			copies := int64(1)
			if c.opts.DataProfile == "dup" {
				copies = 2
			}
			t.Logf("%d MiB of data -> %d MiB image", total>>20, fi.Size()>>20)
			if fi.Size() > copies*total+c.max {
				t.Errorf("shrunk image %d bytes for %d bytes of data", fi.Size(), total)
			}
			btrfstest.Check(t, []string{img}, true)
			mnt := btrfstest.Mount(t, "ro", img)
			got, err := btrfstest.Scan(mnt)
			if err != nil {
				t.Fatal(err)
			}
			if d := btrfstest.Diff(want, got, btrfstest.DiffOptions{}); len(d) > 0 {
				t.Errorf("image differs from the input:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}
