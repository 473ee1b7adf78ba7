package btrfstest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Fixture file names: testdata/images/NAME.img.zst holds the image,
// NAME.manifest what the kernel showed of it when it was generated.
const (
	fixtureImageExt    = ".img.zst"
	fixtureManifestExt = ".manifest"
)

// ModuleRoot returns the directory holding the module's go.mod, found by
// walking up from the working directory (go test runs each package in its
// own directory).
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("ModuleRoot: no go.mod above the working directory")
		}
		dir = parent
	}
}

// FixtureDir returns the directory of the committed fixture images.
func FixtureDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(ModuleRoot(tb), "testdata", "images")
}

// LogFixturePrefix starts the names of the fixtures with a log tree to
// replay (an fsync after the last commit). FixtureNames leaves them out:
// the kernel replays a log only on a writable mount, and what they show
// depends on replaying it; tests name them (LogFixtureNames).
const LogFixturePrefix = "log-"

// LogFixtureNames lists the committed fixtures with a log tree, sorted.
func LogFixtureNames(tb testing.TB) []string {
	tb.Helper()
	matches, err := filepath.Glob(filepath.Join(FixtureDir(tb), LogFixturePrefix+"*"+fixtureImageExt))
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, 0, len(matches))
	for _, m := range matches {
		names = append(names, strings.TrimSuffix(filepath.Base(m), fixtureImageExt))
	}
	sort.Strings(names)
	return names
}

// FixtureNames lists the committed fixtures (NAME of NAME.img.zst), sorted,
// so tests can run against every fixture without naming each.
func FixtureNames(tb testing.TB) []string {
	tb.Helper()
	matches, err := filepath.Glob(filepath.Join(FixtureDir(tb), "*"+fixtureImageExt))
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, 0, len(matches))
	for _, m := range matches {
		name := strings.TrimSuffix(filepath.Base(m), fixtureImageExt)
		if strings.HasPrefix(name, LogFixturePrefix) {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// OpenFixture decompresses testdata/images/NAME.img.zst into a new
// tb.TempDir() and returns the image path. The copy is the test's own, so it
// may be modified or mounted read-write. Runs of zero blocks become holes,
// so the mostly empty images cost little disk space.
//
// Decompressing ~100 MiB is slow under the race detector (seconds), so the
// decompressed image is also kept in a content-addressed cache (see
// FixtureCacheEnv) and later calls, in any process, copy it sparsely.
func OpenFixture(tb testing.TB, name string) string {
	tb.Helper()
	src := filepath.Join(FixtureDir(tb), name+fixtureImageExt)
	dst := filepath.Join(tb.TempDir(), name+".img")
	cached, err := cachedFixture(src)
	if err == nil {
		err = sparseCopy(cached, dst)
	} else if !errors.Is(err, errNoCache) {
		tb.Logf("OpenFixture(%q): fixture cache: %v; decompressing directly", name, err)
	}
	if err != nil {
		os.Remove(dst)
		err = decompressFile(src, dst)
	}
	if err != nil {
		tb.Fatalf("OpenFixture(%q): %v", name, err)
	}
	return dst
}

// LoadManifest loads testdata/images/NAME.manifest, the kernel's view of the
// fixture at generation time.
func LoadManifest(tb testing.TB, name string) *Tree {
	tb.Helper()
	t, err := Load(filepath.Join(FixtureDir(tb), name+fixtureManifestExt))
	if err != nil {
		tb.Fatalf("LoadManifest(%q): %v", name, err)
	}
	return t
}

// sparseBlock is the granularity at which zeros are turned into holes.
const sparseBlock = 4096

// decompressFile decompresses the zstd file src into a new file dst.
func decompressFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return decompressSparse(in, dst)
}

// decompressSparse writes the zstd stream in to a new file dst, seeking over
// all-zero blocks instead of writing them.
func decompressSparse(in io.Reader, dst string) error {
	dec, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, rerr := io.ReadFull(dec, buf)
		if err := writeNonZero(out, buf[:n], off); err != nil {
			out.Close()
			return err
		}
		off += int64(n)
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(off); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeNonZero writes the blocks of b that are not all zero at off.
func writeNonZero(f *os.File, b []byte, off int64) error {
	for i := 0; i < len(b); {
		j := min(i+sparseBlock, len(b))
		if isZero(b[i:j]) {
			i = j
			continue
		}
		// Extend the run over following non-zero blocks: fewer syscalls.
		k := j
		for k < len(b) && !isZero(b[k:min(k+sparseBlock, len(b))]) {
			k = min(k+sparseBlock, len(b))
		}
		if _, err := f.WriteAt(b[i:k], off+int64(i)); err != nil {
			return err
		}
		i = k
	}
	return nil
}

// zeroBlock is compared against with bytes.Equal, which is far faster than
// a byte loop (and than a byte loop under the race detector).
var zeroBlock = make([]byte, sparseBlock)

func isZero(b []byte) bool { return bytes.Equal(b, zeroBlock[:len(b)]) }
