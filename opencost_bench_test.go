package btrfs_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/mkfs"
)

// manyFiles is a mkfs.Source of n empty files, 1,000 to a directory
// (d0/f0 ... d0/f999, d1/f0, ...): the shape of a large filesystem whose
// metadata is many small items.
type manyFiles struct {
	n, i int
	dir  int
}

func (s *manyFiles) Next() (*mkfs.Entry, error) {
	const per = 1000
	t := time.Unix(1700000000, 0)
	if s.i >= s.n {
		return nil, io.EOF
	}
	if s.i%per == 0 && s.dir <= s.i/per {
		s.dir = s.i/per + 1
		return &mkfs.Entry{Path: fmt.Sprintf("d%d", s.i/per), Kind: mkfs.KindDir, Perm: 0o755, Atime: t, Mtime: t}, nil
	}
	e := &mkfs.Entry{Path: fmt.Sprintf("d%d/f%d", s.i/per, s.i%per), Kind: mkfs.KindFile, Perm: 0o644, Atime: t, Mtime: t}
	s.i++
	return e, nil
}

func (s *manyFiles) Close() error { return nil }

// buildManyFiles makes (once per directory) an image of n empty files.
func buildManyFiles(tb testing.TB, dir string, n int) string {
	img := filepath.Join(dir, fmt.Sprintf("files-%d.img", n))
	if _, err := os.Stat(img); err == nil {
		return img
	}
	size := int64(1<<30) + int64(n)*4096
	opts := mkfs.BuildOptions{Format: mkfs.Options{Size: size}}
	if _, err := mkfs.Build(img+".tmp", func() (mkfs.Source, error) { return &manyFiles{n: n}, nil }, opts); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(img+".tmp", img); err != nil {
		tb.Fatal(err)
	}
	return img
}

// BenchmarkOpenTouch is issue 12 §5's measurement: one open for writing,
// one new empty file, one commit and close (what `gobtrfs touch IMG:/new`
// does), on filesystems of 10,000 files and, with
// GOBTRFS_BENCH_FILES=10000:1000000, of others. The images are built
// once into GOBTRFS_BENCH_DIR (default: a temporary directory; an image
// already there is used again) and each iteration adds one more file to
// the same image, a negligible growth.
func BenchmarkOpenTouch(b *testing.B) {
	counts := []int{10000}
	if s := os.Getenv("GOBTRFS_BENCH_FILES"); s != "" {
		counts = nil
		for _, f := range filepath.SplitList(s) {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			counts = append(counts, n)
		}
	}
	dir := os.Getenv("GOBTRFS_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			img := buildManyFiles(b, dir, n)
			run := time.Now().UnixNano() // names unique across runs on a kept image
			read0 := readBytes()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				w, err := btrfs.OpenWritable(img, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.CreateEmpty(fmt.Sprintf("touch-%d-%d", run, i), 0o644); err != nil {
					w.Close()
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			if read0 >= 0 {
				b.ReportMetric(float64(readBytes()-read0)/float64(b.N)/(1<<20), "MiB-read/op")
			}
		})
	}
}

// readBytes is what this process has read so far (rchar of /proc/self/io,
// reads from the page cache included), or -1 where that is not known.
func readBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
