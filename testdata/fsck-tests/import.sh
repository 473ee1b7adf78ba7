#!/usr/bin/env bash
# Copies btrfs-progs' own fsck test images (tests/fsck-tests, as gathered in
# the project's shared fixtures) into this directory, one zstd file per image:
# NAME.zst where NAME is the image's name in verdicts.txt (xz dropped, a tar
# member appended after "__"). The contents are the upstream files' bytes
# unchanged; only the outer compression is zstd instead of xz, so the tests
# decompress them with the library the module already has.
# Usage: bash import.sh DIR   (DIR holds the upstream files and verdicts.txt)
set -euo pipefail
src=${1:?usage: import.sh DIR}
dst=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for f in "$src"/*; do
	b=$(basename "$f")
	case "$b" in
	README.md | verdicts.txt) continue ;;
	*.tar.xz)
		base=${b%.tar.xz}
		rm -rf "$tmp"/x && mkdir "$tmp"/x && tar -xJf "$f" -C "$tmp"/x
		for m in "$tmp"/x/*; do zstd -q -19 -f "$m" -o "$dst/${base}__$(basename "$m").zst"; done ;;
	*.xz) xz -dc "$f" | zstd -q -19 -f -o "$dst/${b%.xz}.zst" ;;
	*) zstd -q -19 -f "$f" -o "$dst/$b.zst" ;;
	esac
done
cp "$src/verdicts.txt" "$dst/verdicts.txt"
