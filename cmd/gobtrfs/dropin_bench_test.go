package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkBuilderLinesVsProgs runs each image builder's command line
// (builderCases) through the mkfs.btrfs symlink to gobtrfs and through
// btrfs-progs' mkfs.btrfs in GOBTRFS_PROGS_DIR (6.19: 6.2 lacks --subvol
// TYPE:, --inode-flags and --compress), on the same input: the test's
// small tree plus Go's source tree (or the directory GOBTRFS_BENCH_TREE
// names) under usr/src. It reports both times and ours/progs per line.
// Images are made 1 GiB where the line precreates one, wic's -b too, so
// the larger input fits.
//
//	GOBTRFS_PROGS_DIR=/path/to/btrfs-progs-6.19 go test -run '^$' -bench BuilderLinesVsProgs -benchtime 1x ./cmd/gobtrfs
func BenchmarkBuilderLinesVsProgs(b *testing.B) {
	progs := os.Getenv("GOBTRFS_PROGS_DIR")
	if progs == "" {
		b.Skip("GOBTRFS_PROGS_DIR (a btrfs-progs 6.19 build holding mkfs.btrfs) not set")
	}
	peer := filepath.Join(progs, "mkfs.btrfs")
	tree := os.Getenv("GOBTRFS_BENCH_TREE")
	if tree == "" {
		tree = filepath.Join(runtime.GOROOT(), "src")
	}
	src := rootfs(b)
	if out, err := exec.Command("cp", "-a", tree, filepath.Join(src, "usr", "src")).CombinedOutput(); err != nil {
		b.Fatalf("copy %s: %v\n%s", tree, err, out)
	}
	ours := mkfsBtrfs(b)
	run := func(bin string, tc builderCase) time.Duration {
		img := filepath.Join(b.TempDir(), tc.name+".img")
		if tc.precreate >= 0 {
			if err := os.WriteFile(img, nil, 0o644); err != nil {
				b.Fatal(err)
			}
			if tc.precreate > 0 {
				if err := os.Truncate(img, 1<<30); err != nil {
					b.Fatal(err)
				}
			}
		}
		args := make([]string, len(tc.args))
		for i, a := range tc.args {
			args[i] = strings.NewReplacer("ROOT", src, "IMG", img, "300M", "1G").Replace(a)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), tc.env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
		}
		os.Remove(img)
		return d
	}
	for _, tc := range builderCases() {
		b.Run(tc.name, func(b *testing.B) {
			var o, p time.Duration
			for range b.N {
				o += run(ours, tc)
				p += run(peer, tc)
			}
			b.ReportMetric(o.Seconds()/float64(b.N), "gobtrfs-s")
			b.ReportMetric(p.Seconds()/float64(b.N), "progs-s")
			b.ReportMetric(o.Seconds()/p.Seconds(), "ours/progs")
		})
	}
}
