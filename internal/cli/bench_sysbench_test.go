package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/fileio"
)

// sysbenchRow is one row of the seed's experiment: sysbench fileio's
// parameters, the same for the kernel and for `gobtrfs bench fileio`.
type sysbenchRow struct {
	mode      string // --file-test-mode
	threads   int
	files     int
	total     string // --file-total-size
	block     string // --file-block-size
	fsyncFreq int
	seconds   int
}

// args are the sysbench fileio flags of the row (shared by both sides:
// gobtrfs bench fileio takes sysbench's names).
func (r sysbenchRow) args() []string {
	return []string{
		"--file-num=" + strconv.Itoa(r.files), "--file-total-size=" + r.total,
		"--file-block-size=" + r.block, "--file-test-mode=" + r.mode,
		"--file-fsync-freq=" + strconv.Itoa(r.fsyncFreq), "--threads=" + strconv.Itoa(r.threads),
		"--time=" + strconv.Itoa(r.seconds),
	}
}

// sysbenchResult is what sysbench reports that the experiment compares.
type sysbenchResult struct {
	writtenMiBs, readMiBs  float64
	writesPerS, fsyncsPerS float64
	p95ms                  float64
}

var (
	sbWritten = regexp.MustCompile(`written, MiB/s:\s+([0-9.]+)`)
	sbRead    = regexp.MustCompile(`read, MiB/s:\s+([0-9.]+)`)
	sbWrites  = regexp.MustCompile(`writes/s:\s+([0-9.]+)`)
	sbFsyncs  = regexp.MustCompile(`fsyncs/s:\s+([0-9.]+)`)
	sbP95     = regexp.MustCompile(`95th percentile:\s+([0-9.]+)`)
)

// parseSysbench reads sysbench fileio's run report.
func parseSysbench(out string) (sysbenchResult, error) {
	var r sysbenchResult
	for _, f := range []struct {
		re  *regexp.Regexp
		dst *float64
	}{{sbWritten, &r.writtenMiBs}, {sbRead, &r.readMiBs}, {sbWrites, &r.writesPerS}, {sbFsyncs, &r.fsyncsPerS}, {sbP95, &r.p95ms}} {
		m := f.re.FindStringSubmatch(out)
		if m == nil {
			return r, fmt.Errorf("sysbench output has no %q", f.re)
		}
		*f.dst, _ = strconv.ParseFloat(m[1], 64)
	}
	return r, nil
}

// benchBacking returns a directory for images on the named backing:
// "tmpfs" (a tmpfs mounted for the benchmark) or "disk" (b.TempDir()).
func benchBacking(b *testing.B, kind string) string {
	dir := b.TempDir()
	if kind == "tmpfs" {
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755,size=8g"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	}
	return dir
}

// sysbenchKernel runs the row with sysbench on the kernel's btrfs: a fresh
// mkfs.btrfs image of size bytes in dir, loop-mounted, sysbench's prepare
// (untimed), a sync, then its run.
func sysbenchKernel(b *testing.B, dir string, size int64, r sysbenchRow) sysbenchResult {
	b.Helper()
	if _, err := exec.LookPath("sysbench"); err != nil {
		if os.Getenv("GOBTRFS_INTEROP") == "1" {
			b.Fatal("sysbench is not installed")
		}
		b.Skip("sysbench is not installed")
	}
	img := filepath.Join(dir, "kernel.img")
	os.Remove(img)
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("mkfs.btrfs", "-q", "-f", img).CombinedOutput(); err != nil {
		b.Fatalf("mkfs.btrfs: %v\n%s", err, out)
	}
	mnt := btrfstest.Mount(b, "", img)
	defer btrfstest.Unmount(b, mnt)
	run := func(phase string) string {
		cmd := exec.Command("sysbench", append([]string{"fileio"}, append(r.args(), phase)...)...)
		cmd.Dir = mnt
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("sysbench %s: %v\n%s", phase, err, out)
		}
		return string(out)
	}
	run("prepare")
	unix.Sync()
	res, err := parseSysbench(run("run"))
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// TestParseSysbench reads a report of sysbench 1.0.20.
func TestParseSysbench(t *testing.T) {
	out := strings.Join([]string{
		"File operations:", "    reads/s:                      0.00", "    writes/s:                     2172.66",
		"    fsyncs/s:                     11918.08", "", "Throughput:", "    read, MiB/s:                  0.00",
		"    written, MiB/s:               16.97", "Latency (ms):", "         95th percentile:                        4.41",
	}, "\n")
	r, err := parseSysbench(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.writtenMiBs != 16.97 || r.writesPerS != 2172.66 || r.fsyncsPerS != 11918.08 || r.p95ms != 4.41 || r.readMiBs != 0 {
		t.Errorf("parsed %+v", r)
	}
	if _, err := parseSysbench("no report"); err == nil {
		t.Error("a report without figures parsed")
	}
}

// BenchmarkFileioVsKernel is the seed patch's experiment, run both ways in
// one benchmark: sysbench fileio (the Debian package) on the kernel's
// btrfs, an image loop-mounted, and `gobtrfs bench fileio`'s workload
// (internal/fileio) on an image of the same size, with the same flags;
// on tmpfs and on the disk (b.TempDir()); seqwr and rndwr; 16 and 512
// threads; 512 files, 1 GiB, 8 KiB requests, fsync every 100 requests,
// 10 s. Our side runs with the shortcut on and off from byte-identical
// prepared images (fileio.Compare). Reported per row: MiB/s written by
// each, our MiB/s over the kernel's, and the share of push_leaf_right
// calls that took the shortcut, in total and per tree; the log has one
// line per row for docs/benchmarks.md. Needs root, btrfs-progs and
// sysbench. GOBTRFS_FILEIO_ROWS=tmpfs/rndwr/16,... picks rows.
//
//	go test -run '^$' -bench FileioVsKernel -benchtime 1x -timeout 60m ./internal/cli
func BenchmarkFileioVsKernel(b *testing.B) {
	btrfstest.RequireInterop(b)
	const size = 3 << 30 // the image: 1 GiB of files with room to spare
	want := map[string]bool{}
	for _, r := range strings.Split(os.Getenv("GOBTRFS_FILEIO_ROWS"), ",") {
		if r != "" {
			want[r] = true
		}
	}
	for _, backing := range []string{"tmpfs", "disk"} {
		for _, mode := range []string{"seqwr", "rndwr"} {
			for _, threads := range []int{16, 512} {
				name := fmt.Sprintf("%s/%s/%d", backing, mode, threads)
				if len(want) > 0 && !want[name] {
					continue
				}
				b.Run(name, func(b *testing.B) {
					row := sysbenchRow{mode: mode, threads: threads, files: 512, total: "1G", block: "8K", fsyncFreq: 100, seconds: 10}
					for range b.N {
						dir := benchBacking(b, backing)
						kern := sysbenchKernel(b, dir, size, row)
						os.Remove(filepath.Join(dir, "kernel.img"))
						ours := fileioOurs(b, dir, size, row)
						b.ReportMetric(kern.writtenMiBs, "kernel-MiB/s")
						b.ReportMetric(ours[0].WrittenMiBPerS, "ours-MiB/s")
						b.ReportMetric(ours[1].WrittenMiBPerS, "ours-noshortcut-MiB/s")
						if kern.writtenMiBs > 0 {
							b.ReportMetric(ours[0].WrittenMiBPerS/kern.writtenMiBs, "ours/kernel")
						}
						b.ReportMetric(100*ours[0].Total.ShortcutShare(), "shortcut-%")
						b.Logf("row %s: kernel %.2f MiB/s (fsyncs/s %.0f, p95 %.2f ms); ours %.2f MiB/s shortcut on, %.2f off (ratio %.2f); commits %d; peak heap %d MiB; %s",
							name, kern.writtenMiBs, kern.fsyncsPerS, kern.p95ms, ours[0].WrittenMiBPerS, ours[1].WrittenMiBPerS,
							ours[0].WrittenMiBPerS/max(kern.writtenMiBs, 1e-9), ours[0].Commits, ours[0].PeakHeapBytes>>20, shortcutShares(ours[0]))
					}
				})
			}
		}
	}
}

// fileioOurs prepares an image of size bytes in dir with our mkfs and the
// row's files, then runs the row with the shortcut on and off from
// identical copies.
func fileioOurs(b *testing.B, dir string, size int64, r sysbenchRow) [2]fileio.Result {
	b.Helper()
	total, err := fileio.ParseSize(r.total)
	if err != nil {
		b.Fatal(err)
	}
	block, err := fileio.ParseSize(r.block)
	if err != nil {
		b.Fatal(err)
	}
	img := filepath.Join(dir, "ours.img")
	c := fileio.Config{Image: img, Mode: r.mode, FileNum: r.files, FileTotalSize: total, FileBlockSize: int(block),
		FsyncFreq: r.fsyncFreq, Threads: r.threads, Time: time.Duration(r.seconds) * time.Second}
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("mkfs.btrfs", "-q", "-f", img).CombinedOutput(); err != nil {
		b.Fatalf("mkfs.btrfs: %v\n%s", err, out)
	}
	if _, err := fileio.Prepare(c); err != nil {
		b.Fatal(err)
	}
	unix.Sync()
	res, err := fileio.Compare(c, false)
	if err != nil {
		b.Fatal(err)
	}
	btrfstest.Check(b, []string{img}, true)
	os.Remove(img)
	return res
}

// shortcutShares says, per tree with push_leaf_right calls, how many took
// the shortcut.
func shortcutShares(r fileio.Result) string {
	var names []string
	for n := range r.Trees {
		names = append(names, n)
	}
	sort.Strings(names)
	out := fmt.Sprintf("total %d of %d (%.1f%%)", r.Total.PushLeafRightShortcut, r.Total.PushLeafRight, 100*r.Total.ShortcutShare())
	for _, n := range names {
		if t := r.Trees[n]; t.PushLeafRight > 0 {
			out += fmt.Sprintf(", %s %d of %d", n, t.PushLeafRightShortcut, t.PushLeafRight)
		}
	}
	return out
}
