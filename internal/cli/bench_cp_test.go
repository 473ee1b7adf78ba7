package cli

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// benchCpSize is the size of the file BenchmarkCpVsKernel copies.
const benchCpSize = 1 << 30

// BenchmarkCpVsKernel copies a 1 GiB host file into a fresh 4 GiB
// mkfs.btrfs image as /f, with `gobtrfs cp FILE IMAGE:/f` (through Main,
// from the start of the command to its end: open, write, commit with its
// fsyncs, close) and with the kernel (the image loop-mounted beforehand,
// io.Copy from this process, then syncfs; timed from the open of the
// source to the end of syncfs). The source lives on a tmpfs mounted for
// the benchmark, so reading it costs both sides the same and no disk.
//
// Variants: "plain" (random data, no compression), "zstd" (random data,
// compress=zstd against --compress zstd; the data does not compress, so
// both give up on it), "zstd-half" (every 64 bytes 32 random and 32 of a
// pattern, so zstd halves it), and "zstd-force-half" (the same data,
// compress-force=zstd against CompressForce: the kernel's compress
// heuristic finds that data too random and stores it as is, which
// compress-force skips). Reported: MiB/s both ways, the ratio
// gobtrfs/kernel, and the space each image then uses (statfs of a kernel
// mount: data and metadata, every copy), and the CPU time of the gobtrfs
// side. Needs root and btrfs-progs.
//
// While the cp command is not registered (or, for the zstd variants, has
// no --compress flag) the gobtrfs side calls the library directly
// (OpenWritable, CreateEmpty, WriteFrom, Commit) and logs that it did.
//
//	go test -run '^$' -bench CpVsKernel -benchtime 1x -count 2 ./internal/cli
func BenchmarkCpVsKernel(b *testing.B) {
	btrfstest.RequireInterop(b)
	src := benchCpTmpfs(b)
	for _, v := range []struct {
		name, compress string
		force, half    bool
	}{
		{"plain", "", false, false},
		{"zstd", "zstd", false, false},
		{"zstd-half", "zstd", false, true},
		{"zstd-force-half", "zstd", true, true},
	} {
		b.Run(v.name, func(b *testing.B) {
			file := filepath.Join(src, v.name)
			benchCpSource(b, file, v.half)
			defer os.Remove(file)
			var ours, kern, oursCPU time.Duration
			var oursUsed, kernUsed int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				img := btrfstest.Mkfs(b, btrfstest.MkfsOptions{Size: 4 << 30})
				kimg := btrfstest.Mkfs(b, btrfstest.MkfsOptions{Size: 4 << 30})
				unix.Sync()
				b.StartTimer()
				cpu := benchCPU()
				ours += benchCpOurs(b, file, img, v.compress, v.force)
				oursCPU += benchCPU() - cpu
				b.StopTimer()
				if i == 0 {
					btrfstest.Check(b, []string{img}, true)
				}
				mnt := btrfstest.Mount(b, "ro", img)
				oursUsed += benchUsed(b, mnt)
				btrfstest.Unmount(b, mnt)
				os.Remove(img)
				opts := ""
				switch {
				case v.force:
					opts = "compress-force=" + v.compress
				case v.compress != "":
					opts = "compress=" + v.compress
				}
				d, used := benchCpKernel(b, file, kimg, opts)
				kern += d
				kernUsed += used
				os.Remove(kimg)
				b.StartTimer()
			}
			mb := float64(benchCpSize) / (1 << 20) * float64(b.N)
			b.ReportMetric(mb/ours.Seconds(), "gobtrfs-MiB/s")
			b.ReportMetric(mb/kern.Seconds(), "kernel-MiB/s")
			b.ReportMetric(kern.Seconds()/ours.Seconds(), "speedup")
			b.ReportMetric(oursCPU.Seconds()/float64(b.N), "gobtrfs-cpu-s")
			b.ReportMetric(float64(oursUsed)/float64(b.N)/(1<<20), "gobtrfs-used-MiB")
			b.ReportMetric(float64(kernUsed)/float64(b.N)/(1<<20), "kernel-used-MiB")
		})
	}
}

// benchCpOurs copies file into img as /f and returns the time it took.
func benchCpOurs(b *testing.B, file, img, compress string, force bool) time.Duration {
	start := time.Now()
	if benchCpCommand(compress, force) {
		args := []string{"cp"}
		if compress != "" {
			args = append(args, "--compress", compress)
		}
		if force {
			args = append(args, "--compress-force")
		}
		var o, e strings.Builder
		if code := Main(append(args, file, img+":/f"), strings.NewReader(""), &o, &e); code != ExitOK {
			b.Fatalf("gobtrfs %v: exit %d: %s", args, code, e.String())
		}
		return time.Since(start)
	}
	b.Log("no gobtrfs cp (or no --compress): using OpenWritable+WriteFrom+Commit")
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: compress, CompressForce: force})
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.Close()
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := fsys.CreateEmpty("f", 0o644); err != nil {
		b.Fatal(err)
	}
	if n, err := fsys.WriteFrom("f", f, 0); err != nil || n != benchCpSize {
		b.Fatalf("WriteFrom: %d bytes, %v", n, err)
	}
	if err := fsys.Commit(); err != nil {
		b.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchCpKernel mounts img with opts, copies file into it as /f and
// syncs; it returns the time from opening the source to the end of the
// sync, and the bytes then in use. Mounting and unmounting are not timed.
func benchCpKernel(b *testing.B, file, img, opts string) (time.Duration, int64) {
	mnt := btrfstest.Mount(b, opts, img)
	defer btrfstest.Unmount(b, mnt)
	start := time.Now()
	in, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(mnt, "f"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	syncfs(b, mnt)
	return time.Since(start), benchUsed(b, mnt)
}

// benchCPU is the user and system time this process has used: the
// gobtrfs side's CPU cost, which other jobs on a shared machine disturb
// less than its wall time. (The kernel side's work happens in kernel
// threads, so it has no such figure.)
func benchCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchUsed is the space in use (data and metadata, every copy) in the
// filesystem mounted at mnt, as statfs reports it.
func benchUsed(b *testing.B, mnt string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		b.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// benchCpCommand reports whether the gobtrfs command line has a cp
// command, with the flags the variant needs (--compress, and
// --compress-force when force is set).
func benchCpCommand(compress string, force bool) bool {
	c, _, err := newRootCommand().Find([]string{"cp"})
	if err != nil || c.Name() != "cp" {
		return false
	}
	return (compress == "" || c.Flags().Lookup("compress") != nil) &&
		(!force || c.Flags().Lookup("compress-force") != nil)
}

// benchCpTmpfs mounts a tmpfs for the source file, so that neither side
// reads it from a disk.
func benchCpTmpfs(b *testing.B) string {
	dir := b.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755,size=2g"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// benchCpSource writes benchCpSize bytes to path: random, or half
// compressible.
func benchCpSource(b *testing.B, path string, half bool) {
	r := rand.New(rand.NewPCG(7, uint64(len(path))))
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 8<<20)
	for range benchCpSize / len(buf) {
		for i := 0; i < len(buf); i += 8 {
			v := r.Uint64()
			if half && i%64 >= 32 {
				v = uint64(i/64%7) * 0x0101010101010101
			}
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
