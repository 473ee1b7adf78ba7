//go:build linux

package extract_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/extract"
)

// BenchmarkExtractVsKernel measures gobtrfs extract against the kernel
// (loop mount plus cp -a) on the same image of about 1 GiB, with the page
// cache dropped before each run, and reports both throughputs and their
// ratio. Needs root and btrfs-progs.
//
//	go test -run XXX -bench ExtractVsKernel -benchtime 3x ./internal/extract
func BenchmarkExtractVsKernel(b *testing.B) {
	btrfstest.RequireInterop(b)
	for _, v := range []struct{ name, mount string }{{"plain", ""}, {"zstd", "compress-force=zstd"}} {
		b.Run(v.name, func(b *testing.B) {
			img := benchImage(b, v.mount)
			b.ResetTimer()
			var kernel, ours time.Duration
			var bytes int64
			for i := 0; i < b.N; i++ {
				out := benchTmpfs(b)
				dropCaches(b)
				start := time.Now()
				mnt := btrfstest.Mount(b, "ro", img)
				os.Mkdir(out+"/k", 0o755)
				if o, err := exec.Command("cp", "-a", mnt+"/.", out+"/k").CombinedOutput(); err != nil {
					b.Fatalf("cp -a: %v\n%s", err, o)
				}
				kernel += time.Since(start)
				btrfstest.Unmount(b, mnt)

				dropCaches(b)
				start = time.Now()
				fsys, err := btrfs.Open(img, nil)
				if err != nil {
					b.Fatal(err)
				}
				st, err := extract.Run(context.Background(), fsys, ".", out+"/g", extract.Options{})
				if err != nil {
					b.Fatal(err)
				}
				fsys.Close()
				ours += time.Since(start)
				bytes += st.Bytes
			}
			mb := float64(bytes) / float64(b.N) / (1 << 20)
			b.ReportMetric(mb/(kernel.Seconds()/float64(b.N)), "kernel-MiB/s")
			b.ReportMetric(mb/(ours.Seconds()/float64(b.N)), "gobtrfs-MiB/s")
			b.ReportMetric(kernel.Seconds()/ours.Seconds(), "speedup")
		})
	}
}

// benchImage makes a 2 GiB image holding about 1 GiB: 48 files of 16 MiB
// and 4096 files of 64 KiB, half-compressible data, written by the kernel.
func benchImage(b *testing.B, mountOpts string) string {
	img := btrfstest.Mkfs(b, btrfstest.MkfsOptions{Size: 2 << 30})
	mnt := btrfstest.Mount(b, mountOpts, img)
	r := rand.New(rand.NewPCG(1, 2))
	chunk := make([]byte, 1<<20)
	fill := func(p []byte) {
		for i := 0; i < len(p); i += 64 {
			// 32 random bytes then 32 of a repeating pattern: compressible
			// to about half, like typical binaries and text.
			for j := i; j < min(i+32, len(p)); j++ {
				p[j] = byte(r.Uint32())
			}
			for j := i + 32; j < min(i+64, len(p)); j++ {
				p[j] = byte(j % 7)
			}
		}
	}
	for i := 0; i < 48; i++ {
		f, err := os.Create(filepath.Join(mnt, fmt.Sprintf("big%02d", i)))
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < 16; j++ {
			fill(chunk)
			f.Write(chunk)
		}
		f.Close()
	}
	for d := 0; d < 64; d++ {
		dir := filepath.Join(mnt, fmt.Sprintf("d%02d", d))
		os.Mkdir(dir, 0o755)
		for i := 0; i < 64; i++ {
			fill(chunk[:64<<10])
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), chunk[:64<<10], 0o644)
		}
	}
	btrfstest.Unmount(b, mnt)
	return img
}

func dropCaches(b *testing.B) {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		b.Fatalf("drop caches: %v", err)
	}
}

// benchTmpfs is a fresh tmpfs to extract into, so the destination's speed
// is the same for both and no disk write is measured.
func benchTmpfs(b *testing.B) string {
	dir := b.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}
