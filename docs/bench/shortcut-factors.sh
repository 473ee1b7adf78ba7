#!/bin/bash
# What changes the push_leaf_right shortcut share (docs/benchmarks.md, "What
# changes the shortcut share"): who prepared the files (gobtrfs or the
# kernel through sysbench's prepare), how often the workload fsyncs, and
# how far the run goes (--events). Counters only, so machine load does
# not change the result much. Needs root (loop mount), mkfs.btrfs,
# sysbench, and a gobtrfs binary (GOBTRFS, default: go run ./cmd/gobtrfs).
# Usage: docs/bench/shortcut-factors.sh [DIR]   (DIR: where images go; a tmpfs is best)
set -euo pipefail
D=${1:-/dev/shm/gobtrfs-factors}
G=${GOBTRFS:-"go run ./cmd/gobtrfs"}
mkdir -p "$D"
run() { # label image mode fsync-freq events
	out=$($G bench fileio "$2" --file-num 512 --file-total-size 1G --file-block-size 8K --file-test-mode "$3" \
		--threads 16 --time 0 --events "$5" --file-fsync-freq "$4" --json 2>/dev/null)
	echo "$1 $3 fsync=$4 events=$5: $(echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin); T = r["trees"]; t = r["total"]
f = lambda n: "%d/%d" % (T.get(n, {}).get("push_leaf_right_shortcut", 0), T.get(n, {}).get("push_leaf_right", 0))
print("total %d/%d (%.1f%%) csum %s extent %s fs %s commits %d" % (t["push_leaf_right_shortcut"], t["push_leaf_right"],
      100.0 * t["push_leaf_right_shortcut"] / max(1, t["push_leaf_right"]), f("csum"), f("extent"), f("fs"), r["commits"]))')"
}
mkimg() { rm -f "$1"; truncate -s 3G "$1"; mkfs.btrfs -q "$1" >/dev/null 2>&1; }
kprep() { # the kernel writes the files, as sysbench's prepare does
	mkimg "$1"; mkdir -p "$D/m"
	mount -o loop "$1" "$D/m"
	(cd "$D/m" && sysbench fileio --file-num=512 --file-total-size=1G prepare >/dev/null)
	umount "$D/m"
}
for mode in seqwr rndwr; do
	for f in 100 0; do
		mkimg "$D/ours.img"; run ours-prepared "$D/ours.img" $mode $f 120000
		kprep "$D/k.img"; run kernel-prepared "$D/k.img" $mode $f 120000
	done
done
mkimg "$D/ours.img"; run ours-prepared "$D/ours.img" seqwr 100 400000
kprep "$D/k.img"; run kernel-prepared "$D/k.img" seqwr 100 400000
mkimg "$D/ours.img"; run ours-prepared "$D/ours.img" seqwr 100 950000
for f in 10 1000; do
	mkimg "$D/ours.img"; run ours-prepared "$D/ours.img" rndwr $f 120000
done
rm -rf "$D"
