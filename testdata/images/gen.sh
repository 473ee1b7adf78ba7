#!/usr/bin/env bash
# Regenerates the committed fixture images of this directory: each
# NAME.img.zst (a zstd -19 compressed btrfs image) and NAME.manifest (what
# the kernel showed of it, written by btrfstest.Scan). See README.md.
#
# Needs: root, btrfs-progs (mkfs.btrfs, btrfs), losetup, zstd, go, a kernel
# with btrfs. Usage: sudo testdata/images/gen.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ $(id -u) == 0 ]] || { echo "gen.sh: must run as root" >&2; exit 1; }
for tool in mkfs.btrfs btrfs losetup zstd go; do
	command -v "$tool" >/dev/null || { echo "gen.sh: $tool not found" >&2; exit 1; }
done

work=$(mktemp -d /tmp/gobtrfs-gen.XXXXXX)
mnt=$work/mnt
mkdir "$mnt"
loop=""
cleanup() {
	mountpoint -q "$mnt" && umount "$mnt"
	[[ -n $loop ]] && losetup -d "$loop"
	rm -rf "$work"
}
trap cleanup EXIT

# mkfs.btrfs rejects devices under 109 MiB (114294784 bytes).
size=109M

# The harness test binary populates and scans with the same code the tests
# use (btrfstest.PopulateFixture, btrfstest.Scan).
(cd "$root" && go test -c -o "$work/btrfstest.test" ./internal/btrfstest)
harness() {
	quiet "$work/btrfstest.test" -test.run '^TestGenFixture$' -test.count=1 "$@"
}

# quiet runs a command, showing its output only if it fails (mkfs.btrfs
# prints notes even with -q).
quiet() {
	"$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
}

attach() { loop=$(losetup --find --show "$@"); }
detach() { losetup -d "$loop"; loop=""; }

# finish NAME IMG: scan a read-only mount into NAME.manifest, check the
# image (including data checksums) and compress it.
finish() {
	local name=$1 img=$2
	attach --read-only "$img"
	mount -t btrfs -o ro "$loop" "$mnt"
	harness -gen.scan "$mnt" -gen.manifest "$here/$name.manifest"
	umount "$mnt"
	detach
	quiet btrfs check --readonly --check-data-csum "$img"
	zstd -19 -q -f "$img" -o "$here/$name.img.zst"
	echo "$name: $(stat -c %s "$here/$name.img.zst") bytes compressed, $(wc -l <"$here/$name.manifest") manifest lines"
}

# rootdir_image NAME MKFS_ARGS...: mkfs.btrfs --rootdir of the small tree
# populated on the host filesystem (no compression, reflinks or subvolumes,
# which --rootdir cannot carry), shrunk to the minimum size.
rootdir_image() {
	local name=$1 img=$work/$1.img src=$work/src-$1
	shift
	mkdir "$src"
	harness -gen.populate "$src"
	truncate -s "$size" "$img"
	quiet mkfs.btrfs "$@" --rootdir "$src" --shrink "$img"
	finish "$name" "$img"
}

# kernel_image NAME MKFS_ARGS...: an empty mkfs.btrfs image populated by the
# kernel through a loop mount (compression, prealloc, reflink, subvolume
# and read-only snapshot included). MKFS names another mkfs.btrfs.
kernel_image() {
	local name=$1 img=$work/$1.img
	shift
	truncate -s "$size" "$img"
	quiet "${MKFS:-mkfs.btrfs}" "$@" "$img"
	attach "$img"
	mount -t btrfs "$loop" "$mnt"
	harness -gen.populate "$mnt" -gen.btrfs
	# Discard freed blocks (stale copies of COWed tree blocks), which the
	# loop device turns into holes: they would only cost compressed size.
	sync
	fstrim "$mnt"
	umount "$mnt"
	detach
	finish "$name" "$img"
}

kernel_image kernel-16k-crc32c -L kernel-16k
kernel_image kernel-4k-xxhash -L kernel-4k -n 4096 --csum xxhash
rootdir_image rootdir-16k-crc32c -L rootdir-16k
rootdir_image rootdir-4k-sha256 -L rootdir-4k -n 4096 --csum sha256
rootdir_image rootdir-16k-blake2 -L rootdir-blake2 --csum blake2
# mkfs.btrfs 6.19's defaults (block-group tree on), from a btrfs-progs 6.19
# build in GOBTRFS_PROGS_DIR; without one the committed image stays.
if [[ -n ${GOBTRFS_PROGS_DIR:-} ]]; then
	MKFS=$GOBTRFS_PROGS_DIR/mkfs.btrfs kernel_image kernel-bgt-16k-crc32c -L kernel-bgt
else
	echo "gen.sh: GOBTRFS_PROGS_DIR not set, kernel-bgt-16k-crc32c kept as committed" >&2
fi
# log-NAME: kernel filesystems copied after fsyncs, before the next commit,
# so they hold a log tree to replay; the manifest is what a kernel mount of
# a copy showed after replaying it (the root package's TestGenLogFixtures).
mkdir "$work/log"
(cd "$root" && GOBTRFS_GEN_LOG_FIXTURES=$work/log quiet go test -count=1 -run '^TestGenLogFixtures$' .)
for img in "$work"/log/*.img; do
	name=$(basename "$img" .img)
	zstd -19 -q -f "$img" -o "$here/$name.img.zst"
	cp "$work/log/$name.manifest" "$here/$name.manifest"
	echo "$name: $(stat -c %s "$here/$name.img.zst") bytes compressed (log tree)"
done
du -cb "$here"/*.img.zst | tail -1
