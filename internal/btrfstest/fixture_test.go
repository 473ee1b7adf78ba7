package btrfstest_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// superMagicOffset is where the magic of the primary superblock (at 64 KiB)
// lies: 0x10000 + 0x40.
const superMagicOffset = 0x10040

// TestFixtures runs everywhere: every committed image decompresses to a
// btrfs image and has a manifest that parses and holds the fixture tree.
func TestFixtures(t *testing.T) {
	names := btrfstest.FixtureNames(t)
	if len(names) == 0 {
		t.Fatal("no fixtures in testdata/images")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			img := btrfstest.OpenFixture(t, name)
			f, err := os.Open(img)
			must(t, err)
			defer f.Close()
			magic := make([]byte, 8)
			_, err = f.ReadAt(magic, superMagicOffset)
			must(t, err)
			if !bytes.Equal(magic, []byte("_BHRfS_M")) {
				t.Errorf("superblock magic %q", magic)
			}
			m := btrfstest.LoadManifest(t, name)
			for _, p := range []string{".", "inline", "regular", "sparse", "symlink", "fifo", "socket", "null", "a/linked"} {
				if m.Entries[p] == nil {
					t.Errorf("manifest lacks %q", p)
				}
			}
			if len(m.Links) != 1 {
				t.Errorf("manifest has hardlink groups %q, want one", m.Links)
			}
			if strings.HasPrefix(name, "kernel-") && m.Entries["sv-snap/file"] == nil {
				t.Error("kernel fixture without the read-only snapshot")
			}
		})
	}
}

// TestFixturesMatchKernel proves the committed manifests: mounting each
// fixture now shows exactly what the manifest recorded, and the image
// passes btrfs check. Each fixture is mounted twice at once, as parallel
// test packages may do (same filesystem UUID on two loop devices).
func TestFixturesMatchKernel(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := btrfstest.LoadManifest(t, name)
			img := btrfstest.OpenFixture(t, name)
			twin := btrfstest.OpenFixture(t, name)
			dir := btrfstest.Mount(t, "ro", img)
			dir2 := btrfstest.Mount(t, "ro", twin)
			for _, d := range []string{dir, dir2} {
				if diff := btrfstest.Diff(want, scan(t, d), btrfstest.DiffOptions{CompareNlink: true}); len(diff) > 0 {
					t.Errorf("kernel shows something else than the manifest:\n%s", strings.Join(diff, "\n"))
				}
			}
			btrfstest.Unmount(t, dir)
			btrfstest.Check(t, []string{img}, true)
		})
	}
}
