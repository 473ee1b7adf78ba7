#!/bin/bash
# Issue 15, "Checking a filesystem" in docs/benchmarks.md: gobtrfs check
# against btrfs check (original mode) and btrfs check --mode=lowmem, wall
# time and peak RSS from /usr/bin/time -v, one run each, on
#   (a) an image of FILES files (1,000 to a directory, 100 bytes each,
#       made by our mkfs --rootdir), metadata only;
#   (b) an image of GIB 1-GiB files of random data (our mkfs --rootdir),
#       with data checksums (--check-data-csum).
# Needs btrfs-progs and /usr/bin/time; no root. Run from the module root.
# On a shared machine set RUNS=n: (a) then runs gobtrfs check and btrfs
# check (original) alternately n times, each line with the load average
# before it (lowmem still once).
# Usage: [FILES=1000000] [GIB=3] [TIMEOUT=900] [RUNS=1] docs/bench/check-cost.sh [DIR]
# Everything under DIR is deleted at the end.
set -euo pipefail
D=${1:-/tmp/gobtrfs-checkcost}
FILES=${FILES:-1000000}
GIB=${GIB:-3}
TIMEOUT=${TIMEOUT:-900}
RUNS=${RUNS:-1}
mkdir -p "$D"
trap 'rm -rf "$D"' EXIT
G=$D/gobtrfs
go build -o "$G" ./cmd/gobtrfs

# measure NAME CMD...: one run, prints wall time, peak RSS and exit status.
measure() {
	local name=$1
	shift
	local out=$D/time.out rc=0 load
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	/usr/bin/time -v -o "$out" timeout "$TIMEOUT" "$@" >"$D/cmd.out" 2>&1 || rc=$?
	local wall rss
	wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$out")
	rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$out")
	printf '%-40s wall %10s  peak RSS %8d KiB  exit %d  (load %s)\n' "$name" "$wall" "$rss" "$rc" "$load"
	if [ "$rc" = 124 ]; then echo "  (killed after ${TIMEOUT}s)"; fi
}

img=$D/files.img
rm -rf "$D/in" && mkdir -p "$D/in"
python3 - "$D/in" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for d in range((n + 999) // 1000):
    p = os.path.join(root, "d%d" % d)
    os.mkdir(p)
    for i in range(d * 1000, min(n, (d + 1) * 1000)):
        with open(os.path.join(p, "f%d" % i), "w") as f:
            f.write("%0100d" % i)
PY
SOURCE_DATE_EPOCH=1700000000 "$G" mkfs -q -r "$D/in" -b 8G "$img"
rm -rf "$D/in"
echo "(a) $FILES files: $(du -h --apparent-size "$img" | cut -f1) image, $(du -h "$img" | cut -f1) allocated"
for ((r = 0; r < RUNS; r++)); do
	measure "gobtrfs check" "$G" check "$img"
	measure "btrfs check (original)" btrfs check --readonly "$img"
done
measure "btrfs check --mode=lowmem" btrfs check --readonly --mode=lowmem "$img"
rm -f "$img"

img=$D/data.img
rm -rf "$D/in" && mkdir -p "$D/in"
for ((i = 0; i < GIB; i++)); do head -c 1G /dev/urandom >"$D/in/r$i"; done
SOURCE_DATE_EPOCH=1700000000 "$G" mkfs -q -r "$D/in" -b $((GIB + 2))G "$img"
rm -rf "$D/in"
echo "(b) $GIB GiB of data, --check-data-csum"
sync
measure "gobtrfs check --check-data-csum" "$G" check --check-data-csum "$img"
measure "btrfs check --check-data-csum" btrfs check --readonly --check-data-csum "$img"
measure "btrfs check --mode=lowmem --check-data-csum" btrfs check --readonly --mode=lowmem --check-data-csum "$img"
