#!/bin/bash
# A/B of gobtrfs mount builds against go-fuse's loopback, one round
# ("Untar A/B" and "rm -rf A/B" in docs/benchmarks.md): for each target, a
# fresh 4 GiB image made by mkfs.btrfs in DIR, mounted (a gobtrfs binary:
# `BIN mount IMG MNT`; "loopback": fusepeer serve-loopback over a directory
# of the kernel's mount of the image), then `tar -xf` of Go's src into a
# new directory and `rm -rf` of it, each timed, with the daemon's user +
# system CPU time from /proc/PID/stat around each; our images then go
# through btrfs check. With MODE=sysbench, instead sysbench fileio as
# bench/fusepeer runs it (SBMODE, default seqwr; THREADS, default 16;
# TIME seconds, default 10), MiB/s and the daemon's CPU time.
# Needs root, fusermount3, mkfs.btrfs, losetup, tar, bc (and sysbench).
# FUSEPEER names a built bench/fusepeer binary (cd bench/fusepeer && go
# build); EXTRA adds gobtrfs mount flags (--debug, --cpuprofile F).
# Run rounds in a loop, the targets interleaved:
#   for r in 1 2 3 4; do docs/bench/fuse-ab.sh /var/tmp/ab ./gobtrfs-main ./gobtrfs-new loopback; done
set -uo pipefail
W=${1:?usage: fuse-ab.sh DIR TARGET...}
shift
mkdir -p "$W"
W=$(cd "$W" && pwd)
FUSEPEER=${FUSEPEER:-$W/fusepeer}
TAR=$W/gosrc.tar
[ -f "$TAR" ] || tar -cf "$TAR" -C "$(go env GOROOT)" src
cpu() { awk '{printf "%.2f", ($14+$15)/100}' "/proc/$1/stat"; }
now() { date +%s.%N; }
for t in "$@"; do
	img=$W/ab.img mnt=$W/mnt
	rm -f "$img"
	mkdir -p "$mnt"
	truncate -s 4G "$img"
	mkfs.btrfs -f -q "$img" >/dev/null 2>&1
	if [ "$t" = loopback ]; then
		loop=$(losetup --find --show "$img")
		mkdir -p "$W/kmnt"
		mount "$loop" "$W/kmnt"
		mkdir "$W/kmnt/src"
		"$FUSEPEER" serve-loopback "$W/kmnt/src" "$mnt" 2>"$W/daemon.log" &
	else
		# shellcheck disable=SC2086
		"$t" mount ${EXTRA:-} "$img" "$mnt" 2>"$W/daemon.log" &
	fi
	pid=$!
	for _ in $(seq 200); do mountpoint -q "$mnt" && break; sleep 0.05; done
	load=$(cut -d' ' -f1 /proc/loadavg)
	if [ "${MODE:-meta}" = sysbench ]; then
		mkdir "$mnt/sb"
		args="fileio --file-total-size=256M --file-num=16 --file-block-size=8192 --file-test-mode=${SBMODE:-seqwr} --file-fsync-freq=100 --threads=${THREADS:-16} --time=${TIME:-10} --events=0"
		# shellcheck disable=SC2086
		[ "${SBMODE:-seqwr}" = seqwr ] || (cd "$mnt/sb" && sysbench $args prepare >/dev/null)
		c0=$(cpu $pid)
		# shellcheck disable=SC2086
		out=$(cd "$mnt/sb" && sysbench $args run)
		c1=$(cpu $pid)
		mibs=$(echo "$out" | awk '/written, MiB\/s:/{w=$3} /read, MiB\/s:/{r=$3} END{print r+w}')
		result="${SBMODE:-seqwr} ${THREADS:-16} threads $mibs MiB/s daemon_cpu $(echo "$c1-$c0" | bc)"
	else
		mkdir "$mnt/meta"
		c0=$(cpu $pid)
		a=$(now)
		tar -xf "$TAR" -C "$mnt/meta"
		b=$(now)
		c1=$(cpu $pid)
		rm -rf "$mnt/meta"
		c=$(now)
		c2=$(cpu $pid)
		result=$(printf "untar %.2f rm %.2f cpu_untar %.2f cpu_rm %.2f" "$(echo "$b-$a" | bc)" "$(echo "$c-$b" | bc)" "$(echo "$c1-$c0" | bc)" "$(echo "$c2-$c1" | bc)")
	fi
	fusermount3 -u "$mnt"
	wait $pid
	if [ "$t" = loopback ]; then
		umount "$W/kmnt"
		losetup -d "$loop"
	elif ! btrfs check --readonly --check-data-csum "$img" >/dev/null 2>&1; then
		echo "btrfs check FAILED for $t"
	fi
	echo "$(basename "$t") $result load $load"
	rm -f "$img"
done
