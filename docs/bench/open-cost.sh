#!/bin/bash
# Issue 12 §5, "Open cost" in docs/benchmarks.md: one small change on a
# filesystem of many files, gobtrfs against the kernel. Builds (once, kept
# in DIR) images of FILES empty files (1,000 to a directory) with our mkfs,
# then measures
#   - BenchmarkOpenTouch: OpenWritable + one new file + commit + close, in
#     process, time and bytes read per run;
#   - `gobtrfs touch IMG:/new`, the command, wall time per run;
#   - the kernel: mount -o loop + touch + umount, wall time per run.
# Needs root and a kernel with btrfs for the last. Run from the module root.
# GOBTRFS names another gobtrfs binary to time (an older build, to compare);
# BENCH=0 skips the go test benchmark.
# Usage: [FILES=10000:1000000] [N=5] docs/bench/open-cost.sh [DIR]
set -euo pipefail
D=${1:-/tmp/gobtrfs-opencost}
FILES=${FILES:-10000:1000000}
N=${N:-5}
mkdir -p "$D"
[ "${BENCH:-1}" = 0 ] || GOBTRFS_BENCH_DIR=$D GOBTRFS_BENCH_FILES=$FILES \
	go test -run '^$' -bench 'BenchmarkOpenTouch$' -benchtime "${N}x" -count 1 . | grep '^Benchmark'
G=${GOBTRFS:-$D/gobtrfs}
[ -n "${GOBTRFS:-}" ] || go build -o "$G" ./cmd/gobtrfs
m=$(mktemp -d)
trap 'umount "$m" 2>/dev/null || true; rmdir "$m"; rm -f "$D/work.img"' EXIT
ms() { echo $(( ($2 - $1) / 1000000 / N )); }
for n in ${FILES//:/ }; do
	img=$D/files-$n.img
	cp --sparse=always "$img" "$D/work.img"
	sync
	t0=$(date +%s%N)
	for i in $(seq "$N"); do "$G" touch "$D/work.img:/g$i"; done
	t1=$(date +%s%N)
	cp --sparse=always "$img" "$D/work.img"
	sync
	t2=$(date +%s%N)
	for i in $(seq "$N"); do
		mount -o loop "$D/work.img" "$m"
		touch "$m/k$i"
		umount "$m"
	done
	t3=$(date +%s%N)
	echo "files=$n: gobtrfs touch $(ms "$t0" "$t1") ms, kernel mount+touch+umount $(ms "$t2" "$t3") ms (mean of $N)"
done
