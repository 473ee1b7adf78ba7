//go:build linux

package btrfstest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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
// passes btrfs check.
func TestFixturesMatchKernel(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := btrfstest.LoadManifest(t, name)
			img := btrfstest.OpenFixture(t, name)
			dir := btrfstest.Mount(t, "ro", img)
			if diff := btrfstest.Diff(want, scan(t, dir), btrfstest.DiffOptions{CompareNlink: true}); len(diff) > 0 {
				t.Errorf("kernel shows something else than the manifest:\n%s", strings.Join(diff, "\n"))
			}
			btrfstest.Unmount(t, dir)
			btrfstest.Check(t, []string{img}, true)
		})
	}
}

// TestMountSameFSIDTwice: a second mount of a copy of a mounted filesystem
// fails with a clear message instead of hitting the kernel's unreliable
// temp-fsid path, and once the first is unmounted the copy mounts.
func TestMountSameFSIDTwice(t *testing.T) {
	btrfstest.RequireInterop(t)
	t.Parallel()
	name := btrfstest.FixtureNames(t)[0]
	img, twin := btrfstest.OpenFixture(t, name), btrfstest.OpenFixture(t, name)
	dir := btrfstest.Mount(t, "ro", img)
	r := record(t, func(tb testing.TB) { btrfstest.Mount(tb, "ro", twin) })
	if !r.failed || !strings.Contains(r.msg, "already mounted by this test process") {
		t.Fatalf("second mount of one fsid: failed=%v msg=%q", r.failed, r.msg)
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Unmount(t, btrfstest.Mount(t, "ro", twin))
}

// TestOpenFixtureCache: a copy from the cache has the bytes of a fresh
// decompression, and is sparse.
func TestOpenFixtureCache(t *testing.T) {
	name := btrfstest.FixtureNames(t)[0]
	t.Setenv(btrfstest.FixtureCacheEnv, t.TempDir())
	a := btrfstest.OpenFixture(t, name) // decompresses into the empty cache
	b := btrfstest.OpenFixture(t, name) // copies from it
	if sa, sb := fileSum(t, a), fileSum(t, b); sa != sb {
		t.Fatalf("fixture copies differ: %s %s", sa, sb)
	}
	var st unix.Stat_t
	must(t, unix.Stat(b, &st))
	if st.Blocks*512 > st.Size/4 {
		t.Errorf("cached copy uses %d bytes for a %d-byte image: not sparse", st.Blocks*512, st.Size)
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	must(t, err)
	return hex.EncodeToString(h.Sum(nil))
}
