//go:build linux

package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// BenchmarkSnapshotVsKernel measures, on a subvolume of benchFiles()
// files (100,000; GOBTRFS_BENCH_FILES for fewer), three steps each way:
// a snapshot, deleting it (it shares every block with its source), and
// deleting the source (all its blocks its own, every leaf read and
// freed).
//
//   - library: FS.Snapshot + Commit, DeleteSubvolume + Commit (twice), on
//     one open writable FS (the open is not timed);
//   - cli: the wall time of `gobtrfs subvolume snapshot` and `gobtrfs
//     subvolume delete` (in process: open, change, commit, close);
//   - kernel: `btrfs subvolume snapshot` + syncfs, `btrfs subvolume
//     delete -c` + `btrfs filesystem sync` (which wakes the cleaner) +
//     `btrfs subvolume sync` (until the cleaner has dropped the tree) +
//     syncfs, on a loop mount of a copy of the same image.
//
// Every way starts from a copy of one image (gobtrfs mkfs --rootdir of a
// host tree of small inline files, --subvol sv). Reported: milliseconds
// per step and the ratios kernel/ours (above 1: we are faster).
func BenchmarkSnapshotVsKernel(b *testing.B) {
	btrfstest.RequireInterop(b)
	n := benchFiles()
	_, files := benchTree(n)
	host := b.TempDir()
	for _, f := range files {
		p := filepath.Join(host, "sv", f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("content of %s\n", f)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	base := filepath.Join(b.TempDir(), "base.img")
	var o, e strings.Builder
	if code := Main([]string{"mkfs", "-q", "-b", "2G", "--rootdir", host, "--subvol", "sv", base}, strings.NewReader(""), &o, &e); code != ExitOK {
		b.Fatalf("mkfs: exit %d: %s", code, e.String())
	}
	steps := []string{"snapshot", "delete-snapshot", "delete-source"}
	var lib, cli, kern [3]time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for way, d := range []*[3]time.Duration{&lib, &cli, &kern} {
			img := copyImage(b, base)
			switch way {
			case 0:
				benchSnapshotLib(b, img, d)
			case 1:
				benchSnapshotCLI(b, img, d)
			case 2:
				benchSnapshotKernel(b, img, d)
			}
			if way < 2 {
				btrfstest.Check(b, []string{img}, false)
			}
			os.Remove(img)
		}
	}
	for i, s := range steps {
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
		b.ReportMetric(per(lib[i]), "lib-"+s+"-ms")
		b.ReportMetric(per(cli[i]), "cli-"+s+"-ms")
		b.ReportMetric(per(kern[i]), "kernel-"+s+"-ms")
		b.ReportMetric(float64(kern[i])/float64(lib[i]), s+"-kernel/lib")
		b.ReportMetric(float64(kern[i])/float64(cli[i]), s+"-kernel/cli")
	}
}

// copyImage copies the image base to a new file in a temporary
// directory, sparse (runs of zeros skipped), and syncs it, so that no
// step pays for the copy's writeback.
func copyImage(b *testing.B, base string) string {
	b.Helper()
	img := filepath.Join(b.TempDir(), "fs.img")
	in, err := os.Open(base)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(img)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 && !allZero(buf[:n]) {
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				b.Fatal(err)
			}
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := out.Truncate(off); err != nil {
		b.Fatal(err)
	}
	if err := out.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	return img
}

func benchSnapshotLib(b *testing.B, img string, d *[3]time.Duration) {
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		b.Fatal(err)
	}
	timed := func(i int, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		d[i] += time.Since(start)
	}
	timed(0, func() error { _, err := w.Snapshot("sv", "snap", nil); return err })
	timed(1, func() error { return w.DeleteSubvolume("snap") })
	timed(2, func() error { return w.DeleteSubvolume("sv") })
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

func benchSnapshotCLI(b *testing.B, img string, d *[3]time.Duration) {
	for i, args := range [][]string{
		{"subvolume", "snapshot", img + ":/sv", img + ":/snap"},
		{"subvolume", "delete", img + ":/snap"},
		{"subvolume", "delete", img + ":/sv"},
	} {
		var o, e strings.Builder
		start := time.Now()
		if code := Main(args, strings.NewReader(""), &o, &e); code != ExitOK {
			b.Fatalf("%q: exit %d: %s", args, code, e.String())
		}
		d[i] += time.Since(start)
	}
}

func benchSnapshotKernel(b *testing.B, img string, d *[3]time.Duration) {
	mnt := btrfstest.Mount(b, "", img)
	defer btrfstest.Unmount(b, mnt)
	btrfs := func(args ...string) {
		if out, err := exec.Command("btrfs", args...).CombinedOutput(); err != nil {
			b.Fatalf("btrfs %q: %v\n%s", args, err, out)
		}
	}
	sv, snap := filepath.Join(mnt, "sv"), filepath.Join(mnt, "snap")
	start := time.Now()
	btrfs("subvolume", "snapshot", sv, snap)
	syncfs(b, mnt)
	d[0] += time.Since(start)
	for i, p := range []string{snap, sv} {
		start := time.Now()
		btrfs("subvolume", "delete", "-c", p)
		// BTRFS_IOC_SYNC wakes the cleaner, which would otherwise wait
		// for the next periodic commit (30 s).
		btrfs("filesystem", "sync", mnt)
		btrfs("subvolume", "sync", mnt)
		syncfs(b, mnt)
		d[i+1] += time.Since(start)
	}
}
