//go:build linux

package mkfs

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// reflinkTree writes the input of the reflink tests below dir: files of
// whole sectors, of sizes that end inside a sector, one a sector long,
// one shorter than a sector but too long to be inline, an inline one,
// an empty one, a sparse one and a compressible one. It returns the
// bytes a Reflink build shares with it (once per copy): the whole
// sectors of every file of at least a sector (inline files and partial
// last sectors are written).
func reflinkTree(t *testing.T, dir string, seed uint64) int64 {
	t.Helper()
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)}))
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(rel string) string { return filepath.Join(dir, rel) }
	must(os.MkdirAll(p("d"), 0o755))
	files := map[string][]byte{
		"big":      rnd(24 << 20), // three 8 MiB batches
		"odd":      rnd(5<<20 + 1234),
		"tail":     rnd(10000),
		"sector":   rnd(4096),
		"mid":      rnd(3000), // not inline (over max_inline), no whole sector
		"inline":   []byte("a short file stays inline\n"),
		"empty":    nil,
		"d/nested": rnd(1<<20 + 1),
		"text":     bytes.Repeat([]byte("compressible text, shared as it is "), 60000),
	}
	var shared int64
	for name, data := range files {
		must(os.WriteFile(p(name), data, 0o644))
		shared += int64(len(data)) &^ 4095
	}
	f, err := os.Create(p("sparse"))
	must(err)
	_, err = f.WriteAt(rnd(64<<10), 0)
	must(err)
	_, err = f.WriteAt(rnd(8192+777), 2<<20) // its data run ends on the block boundary: 12 KiB
	must(err)
	must(f.Truncate(4 << 20))
	must(f.Close())
	return shared + 64<<10 + 12<<10
}

// sharedRanges merges the physical ranges of the shared extents of exts.
func sharedRanges(exts []btrfstest.FiemapExtent) [][2]uint64 {
	var rs [][2]uint64
	for _, e := range exts {
		if e.Shared {
			rs = append(rs, [2]uint64{e.Physical, e.Physical + e.Length})
		}
	}
	slices.SortFunc(rs, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]uint64
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// checkShared asserts that the image file's shared extents cover the
// physical blocks of every whole sector of the input files of at least
// a sector: the image refers to the input's blocks rather than copies.
func checkShared(t *testing.T, img, src string) {
	t.Helper()
	have := sharedRanges(btrfstest.Fiemap(t, img))
	covered := func(lo, hi uint64) bool {
		for _, r := range have {
			if r[0] <= lo && hi <= r[1] {
				return true
			}
		}
		return false
	}
	filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || fi.Size() < 4096 {
			return err
		}
		whole := uint64(fi.Size()) &^ 4095
		for _, e := range btrfstest.Fiemap(t, p) {
			lo, hi := e.Logical, min(e.Logical+e.Length, whole)
			if lo >= hi {
				continue
			}
			if !covered(e.Physical, e.Physical+hi-lo) {
				t.Errorf("%s: extent %v is not shared by the image (its shared ranges: %v)", p, e, have)
			}
		}
		return nil
	})
}

// TestBuildReflink builds images with Reflink from a tree on a host
// btrfs into image files on the same filesystem: the data extents' whole
// sectors are shared with the input (the build's counters, and FIEMAP
// on the image file), for SINGLE and DUP data (both copies share) and
// with compression asked for (shared extents stay uncompressed); the
// images pass btrfs check with data checksums and the kernel shows the
// input.
func TestBuildReflink(t *testing.T) {
	btrfstest.RequireInterop(t)
	host := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 1 << 30}))
	src := filepath.Join(host, "src")
	shareable := reflinkTree(t, src, testSeed(t))
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		opts   BuildOptions
		copies int64
	}{
		{"single", BuildOptions{}, 1},
		{"dup", BuildOptions{Format: Options{DataProfile: "dup"}}, 2},
		{"zstd", BuildOptions{Compress: "zstd", CommitBytes: 8 << 20}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := filepath.Join(host, tc.name+".img")
			t.Cleanup(func() { os.Remove(img) })
			opts := tc.opts
			opts.Reflink, opts.PrePass = true, true
			opts.Format.Size = 256 << 20
			st, err := Build(img, dirOpener(src), opts)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			t.Logf("%d data bytes, %d shared, %d not shared", st.DataBytes, st.SharedBytes, st.NotSharedBytes)
			if st.NotSharedBytes != 0 || st.SharedBytes != tc.copies*shareable {
				t.Errorf("shared %d bytes and wrote %d the host refused, want %d shared and none refused",
					st.SharedBytes, st.NotSharedBytes, tc.copies*shareable)
			}
			checkShared(t, img, src)
			verify(t, img, want, btrfstest.DiffOptions{CompareNlink: true})
		})
	}
}

// TestBuildReflinkRefused builds with Reflink from an input on another
// filesystem than the image: the host refuses every clone (EXDEV), the
// data are written instead and counted as not shared, and the image is
// whole.
func TestBuildReflinkRefused(t *testing.T) {
	btrfstest.RequireInterop(t)
	host := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	src := t.TempDir() // not on the host btrfs
	shareable := reflinkTree(t, src, 1)
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(host, "img")
	st, err := Build(img, dirOpener(src), BuildOptions{Reflink: true, PrePass: true, Format: Options{Size: 200 << 20}})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if st.SharedBytes != 0 || st.NotSharedBytes != shareable {
		t.Errorf("shared %d bytes and wrote %d the host refused, want none shared and %d refused",
			st.SharedBytes, st.NotSharedBytes, shareable)
	}
	verify(t, img, want, btrfstest.DiffOptions{CompareNlink: true})
}
