//go:build linux

package mkfs_test

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// benchImageSize is the size of the sparse image both sides fill when
// they do not shrink: the same for both, so allocation policies compare.
const benchImageSize = 2 << 30

// benchGoSrc is the tree of many small files: the Go distribution's
// sources (about 157 MB in 12,800 entries for Go 1.26).
const benchGoSrc = "/usr/local/go/src"

// BenchmarkMkfsRootdirVsProgs builds an image from a host directory with
// mkfs.Build (in process, the options `gobtrfs mkfs --rootdir` passes)
// and with `mkfs.btrfs --rootdir` (exec), each into a fresh sparse file
// of 2 GiB, and reports both wall times (each up to an fsync of the
// image, so both are durable), the speedup progs/gobtrfs, and the image
// sizes: bytes allocated to the sparse file (st_blocks*512) and, for the
// shrink variants, the file's size after --shrink. The CPU time of each
// side (user+system of this process during Build, of the mkfs.btrfs
// child) is reported too: it moves less than wall time on a shared
// machine. Work the kernel does in its own threads (writeback) is in
// neither.
//
// The trees are benchGoSrc ("go-src", skipped when absent) and four
// 256 MiB files made here ("large-files": two of random bytes, two half
// compressible). By default the page cache is dropped before each side
// so both read the source cold; GOBTRFS_BENCH_WARM=1 reads the tree once
// before each side instead, so both read it from the cache.
//
// mkfs.btrfs 6.2 has no --compress: in the zstd variants its side is the
// plain build, so the ratio there is gobtrfs with zstd against progs
// without compression. Needs root and btrfs-progs.
//
//	go test -run '^$' -bench MkfsRootdirVsProgs -benchtime 1x -count 2 ./mkfs
func BenchmarkMkfsRootdirVsProgs(b *testing.B) {
	btrfstest.RequireInterop(b)
	trees := []struct {
		name string
		make func(b *testing.B) string
	}{{"go-src", benchGoSrcTree}, {"large-files", benchLargeFiles}}
	variants := []struct {
		name     string
		compress string
		shrink   bool
	}{{"plain", "", false}, {"shrink", "", true}, {"zstd", "zstd", false}, {"zstd-shrink", "zstd", true}}
	for _, tr := range trees {
		b.Run(tr.name, func(b *testing.B) {
			src := tr.make(b)
			for _, v := range variants {
				b.Run(v.name, func(b *testing.B) {
					opts := mkfs.BuildOptions{PrePass: true, Shrink: v.shrink, Compress: v.compress}
					benchMkfsPair(b, src, opts)
				})
			}
		})
	}
}

// benchSide is one side's totals over b.N builds.
type benchSide struct {
	time, cpu   time.Duration
	alloc, size int64
}

// benchCPU is the user and system time used so far by who (this process,
// all its threads). The machine may be shared: CPU time is the figure
// other jobs disturb least.
func benchCPU(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchMkfsPair runs both sides b.N times on src and reports the metrics.
func benchMkfsPair(b *testing.B, src string, opts mkfs.BuildOptions) {
	var ours, progs benchSide
	cli := benchCLI(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		img := benchSparse(b, filepath.Join(dir, "gobtrfs.img"))
		benchPrepareSource(b, src)
		b.StartTimer()
		start, cpu := time.Now(), benchCPU(unix.RUSAGE_SELF)
		if cli != "" {
			ours.cpu += benchRunCLI(b, cli, src, img, opts)
		} else if _, err := mkfs.Build(img, func() (mkfs.Source, error) { return mkfs.OpenDir(src) }, opts); err != nil {
			b.Fatalf("mkfs.Build: %v", err)
		} else {
			ours.cpu += benchCPU(unix.RUSAGE_SELF) - cpu
		}
		benchFsync(b, img)
		ours.time += time.Since(start)
		b.StopTimer()
		ours.add(b, img)
		if i == 0 {
			btrfstest.Check(b, []string{img}, false)
		}
		os.Remove(img)

		img = benchSparse(b, filepath.Join(dir, "progs.img"))
		args := []string{"-q", "-f", "--rootdir", src}
		if opts.Shrink {
			args = append(args, "--shrink")
		}
		benchPrepareSource(b, src)
		b.StartTimer()
		start = time.Now()
		cmd := exec.Command("mkfs.btrfs", append(args, img)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("mkfs.btrfs %v: %v\n%s", args, err, out)
		}
		benchFsync(b, img)
		progs.time += time.Since(start)
		progs.cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		b.StopTimer()
		progs.add(b, img)
		os.Remove(img)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(ours.time.Seconds()/n, "gobtrfs-s")
	b.ReportMetric(progs.time.Seconds()/n, "progs-s")
	b.ReportMetric(progs.time.Seconds()/ours.time.Seconds(), "speedup")
	b.ReportMetric(ours.cpu.Seconds()/n, "gobtrfs-cpu-s")
	b.ReportMetric(progs.cpu.Seconds()/n, "progs-cpu-s")
	b.ReportMetric(float64(ours.alloc)/n/(1<<20), "gobtrfs-alloc-MiB")
	b.ReportMetric(float64(progs.alloc)/n/(1<<20), "progs-alloc-MiB")
	if opts.Shrink {
		b.ReportMetric(float64(ours.size)/n/(1<<20), "gobtrfs-file-MiB")
		b.ReportMetric(float64(progs.size)/n/(1<<20), "progs-file-MiB")
	}
}

// add records the allocated bytes and the size of the image file.
func (s *benchSide) add(b *testing.B, img string) {
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		b.Fatal(err)
	}
	s.alloc += st.Blocks * 512
	s.size += st.Size
}

// benchSparse creates an empty sparse file of benchImageSize at path.
func benchSparse(b *testing.B, path string) string {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(benchImageSize); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return path
}

// benchFsync makes the image durable, so a side that leaves its writes
// in the page cache pays for them like one that syncs.
func benchFsync(b *testing.B, path string) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// benchPrepareSource puts the page cache in the same state for each
// side: empty (the default; written-back first), or holding all of src
// with GOBTRFS_BENCH_WARM=1.
func benchPrepareSource(b *testing.B, src string) {
	unix.Sync()
	if os.Getenv("GOBTRFS_BENCH_WARM") == "1" {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(io.Discard, f)
			return err
		})
		if err != nil {
			b.Fatalf("warm %s: %v", src, err)
		}
		return
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		b.Fatalf("drop caches: %v", err)
	}
}

// benchGoSrcTree returns benchGoSrc, or skips when it is absent.
func benchGoSrcTree(b *testing.B) string {
	if st, err := os.Stat(benchGoSrc); err != nil || !st.IsDir() {
		b.Skipf("%s not found", benchGoSrc)
	}
	return benchGoSrc
}

// benchLargeFiles writes four files of 256 MiB into a new directory: two
// of random bytes (incompressible) and two where every 64 bytes are 32
// random ones and 32 of a pattern (zstd halves them).
func benchLargeFiles(b *testing.B) string {
	dir := b.TempDir()
	r := rand.New(rand.NewPCG(5, 5))
	buf := make([]byte, 8<<20)
	for i := range 4 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("large%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		for range (256 << 20) / len(buf) {
			benchFill(r, buf, i%2 == 1)
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// benchFill fills p with random bytes, or with half-compressible data.
func benchFill(r *rand.Rand, p []byte, half bool) {
	for i := 0; i+8 <= len(p); i += 8 {
		v := r.Uint64()
		if half && i%64 >= 32 {
			v = uint64(i/64%7) * 0x0101010101010101
		}
		for j := range 8 {
			p[i+j] = byte(v >> (8 * j))
		}
	}
}

// benchCLI builds the gobtrfs command when GOBTRFS_BENCH_CLI=1, so our
// side runs as a fresh process like mkfs.btrfs (what a user runs, with
// the command's own runtime settings); "" runs mkfs.Build in process.
func benchCLI(b *testing.B) string {
	if os.Getenv("GOBTRFS_BENCH_CLI") != "1" {
		return ""
	}
	bin := filepath.Join(b.TempDir(), "gobtrfs")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/gobtrfs/btrfs/cmd/gobtrfs").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// benchRunCLI runs `gobtrfs mkfs` with the options opts stands for and
// returns the child's CPU time.
func benchRunCLI(b *testing.B, bin, src, img string, opts mkfs.BuildOptions) time.Duration {
	args := []string{"mkfs", "-q", "--rootdir", src}
	if opts.Shrink {
		args = append(args, "--shrink")
	}
	if opts.Compress != "" {
		args = append(args, "--compress", opts.Compress)
	}
	cmd := exec.Command(bin, append(args, img)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("gobtrfs %v: %v\n%s", args, err, out)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}
