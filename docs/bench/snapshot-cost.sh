#!/bin/bash
# Issue 14, "Snapshots and deleting them" in docs/benchmarks.md: the cost
# of a snapshot of a subvolume of FILES files, and of deleting it and then
# the subvolume itself, gobtrfs (the command, offline) against the kernel
# (loop mount, btrfs subvolume snapshot, delete, waiting for the cleaner
# with btrfs subvolume sync, umount). Both start from copies of one image
# made by our mkfs: a subvolume "sv" of FILES small files (1,000 to a
# directory, 100 bytes each). Needs root and a kernel with btrfs. Run from
# the module root. Usage: [FILES=100000] docs/bench/snapshot-cost.sh [DIR]
set -euo pipefail
D=${1:-/tmp/gobtrfs-snapcost}
FILES=${FILES:-100000}
mkdir -p "$D"
G=$D/gobtrfs
go build -o "$G" ./cmd/gobtrfs
img=$D/sv-$FILES.img
if [ ! -f "$img" ]; then
	rm -rf "$D/in" && mkdir -p "$D/in/sv"
	for ((d = 0; d * 1000 < FILES; d++)); do
		mkdir "$D/in/sv/d$d"
		for ((i = d * 1000; i < FILES && i < (d + 1) * 1000; i++)); do
			printf '%0100d' "$i" >"$D/in/sv/d$d/f$i"
		done
	done
	SOURCE_DATE_EPOCH=1700000000 "$G" mkfs -q -r "$D/in" -u sv -b 2G "$img"
	rm -rf "$D/in"
fi
m=$(mktemp -d)
trap 'umount "$m" 2>/dev/null || true; rmdir "$m"; rm -f "$D/work.img"' EXIT
ms() { echo $(( ($2 - $1) / 1000000 )); }
now() { date +%s%N; }

cp --sparse=always "$img" "$D/work.img" && sync
t0=$(now); "$G" subvolume snapshot -r "$D/work.img:/sv" "$D/work.img:/snap" >/dev/null; t1=$(now)
"$G" subvolume delete "$D/work.img:/snap" >/dev/null; t2=$(now)
"$G" subvolume delete "$D/work.img:/sv" >/dev/null; t3=$(now)
btrfs check --readonly "$D/work.img" >/dev/null 2>&1 || { echo "btrfs check failed on our image"; exit 1; }
echo "gobtrfs: snapshot $(ms "$t0" "$t1") ms, delete the snapshot $(ms "$t1" "$t2") ms, delete the $FILES-file subvolume $(ms "$t2" "$t3") ms (each a whole command: open, change, commit)"

cp --sparse=always "$img" "$D/work.img" && sync
t0=$(now)
mount -o loop "$D/work.img" "$m"
btrfs -q subvolume snapshot -r "$m/sv" "$m/snap"
umount "$m"
t1=$(now)
mount -o loop "$D/work.img" "$m"
btrfs -q subvolume delete -c "$m/snap" && btrfs -q subvolume sync "$m"
umount "$m"
t2=$(now)
mount -o loop "$D/work.img" "$m"
btrfs -q subvolume delete -c "$m/sv" && btrfs -q subvolume sync "$m"
umount "$m"
t3=$(now)
echo "kernel: snapshot $(ms "$t0" "$t1") ms, delete the snapshot $(ms "$t1" "$t2") ms, delete the $FILES-file subvolume $(ms "$t2" "$t3") ms (each mount, change, wait for the cleaner, umount)"
