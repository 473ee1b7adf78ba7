package cli

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// benchFiles is the number of empty files BenchmarkEditVsKernel creates:
// 100,000 as issue 4 asks, or GOBTRFS_BENCH_FILES.
func benchFiles() int {
	if n, err := strconv.Atoi(os.Getenv("GOBTRFS_BENCH_FILES")); err == nil && n > 0 {
		return n
	}
	return 100000
}

// benchTree names the directories and files of the benchmark: 1000 files
// per directory, directories two levels deep (10 top-level ones).
func benchTree(n int) (dirs, files []string) {
	per := 1000
	for d := 0; d*per < n; d++ {
		top := fmt.Sprintf("top%02d", d%10)
		if d < 10 {
			dirs = append(dirs, top)
		}
		dir := fmt.Sprintf("%s/dir%04d", top, d)
		dirs = append(dirs, dir)
		for f := 0; f < per && d*per+f < n; f++ {
			files = append(files, fmt.Sprintf("%s/file-%06d", dir, d*per+f))
		}
	}
	return dirs, files
}

// writeScript writes an edit script of the given command word over paths.
func writeScript(b *testing.B, path string, lines ...[]string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for _, group := range lines {
		for _, l := range group {
			w.WriteString(l)
			w.WriteByte('\n')
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

func prefixed(word string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = word + " " + p
	}
	return out
}

// BenchmarkEditVsKernel creates benchFiles() empty files in a directory
// tree with one `gobtrfs edit` run (open, apply, commit) and with the
// kernel on a loop mount (syscalls from this process, then one sync),
// and then removes them both ways (`rm -r` lines; os.RemoveAll and sync).
// Both start from the same fresh mkfs.btrfs image. Reported: files per
// second each way and the ratio gobtrfs/kernel.
func BenchmarkEditVsKernel(b *testing.B) {
	btrfstest.RequireInterop(b)
	n := benchFiles()
	dirs, files := benchTree(n)
	tmp := b.TempDir()
	create := filepath.Join(tmp, "create.txt")
	remove := filepath.Join(tmp, "remove.txt")
	writeScript(b, create, prefixed("mkdir", dirs), prefixed("touch", files))
	var tops []string
	for _, d := range dirs {
		if !strings.Contains(d, "/") {
			tops = append(tops, d)
		}
	}
	writeScript(b, remove, prefixed("rm -r", tops))
	var ours, kern [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		img := btrfstest.Mkfs(b, btrfstest.MkfsOptions{Size: 1 << 30})
		kimg := btrfstest.Mkfs(b, btrfstest.MkfsOptions{Size: 1 << 30})
		b.StartTimer()
		for j, script := range []string{create, remove} {
			start := time.Now()
			var o, e strings.Builder
			if code := Main([]string{"edit", img, "-f", script}, strings.NewReader(""), &o, &e); code != ExitOK {
				b.Fatalf("edit %s: exit %d: %s", filepath.Base(script), code, e.String())
			}
			ours[j] += time.Since(start)
			if j == 0 {
				b.StopTimer()
				btrfstest.Check(b, []string{img}, false)
				b.StartTimer()
			}
		}
		kern[0] += kernelCreate(b, kimg, dirs, files)
		kern[1] += kernelRemove(b, kimg, tops)
	}
	for j, what := range []string{"create", "remove"} {
		o := float64(n*b.N) / ours[j].Seconds()
		k := float64(n*b.N) / kern[j].Seconds()
		b.ReportMetric(o, "gobtrfs-"+what+"-files/s")
		b.ReportMetric(k, "kernel-"+what+"-files/s")
		b.ReportMetric(o/k, what+"-speedup")
	}
}

// kernelCreate mounts img and makes dirs and empty files through the
// kernel, with one sync at the end; it returns the time from the first
// mkdir to the end of the sync.
func kernelCreate(b *testing.B, img string, dirs, files []string) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	mnt := btrfstest.Mount(b, "", img)
	defer btrfstest.Unmount(b, mnt)
	b.StartTimer()
	start := time.Now()
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(mnt, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range files {
		fd, err := unix.Open(filepath.Join(mnt, f), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
	syncfs(b, mnt)
	d := time.Since(start)
	b.StopTimer()
	return d
}

// kernelRemove mounts img and removes the trees under tops through the
// kernel, with one sync at the end.
func kernelRemove(b *testing.B, img string, tops []string) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	mnt := btrfstest.Mount(b, "", img)
	defer btrfstest.Unmount(b, mnt)
	b.StartTimer()
	start := time.Now()
	for _, t := range tops {
		if err := os.RemoveAll(filepath.Join(mnt, t)); err != nil {
			b.Fatal(err)
		}
	}
	syncfs(b, mnt)
	d := time.Since(start)
	b.StopTimer()
	return d
}

// syncfs flushes the filesystem mounted at dir.
func syncfs(b *testing.B, dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		b.Fatal(err)
	}
}
