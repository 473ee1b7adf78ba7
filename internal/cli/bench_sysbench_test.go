package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
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
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755,size=4g"); err != nil {
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
