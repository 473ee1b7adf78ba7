//go:build linux

package btrfstest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// FixtureCacheEnv names the environment variable that controls the cache of
// decompressed fixture images: unset uses $XDG_CACHE_HOME/gobtrfs/fixtures
// (os.UserCacheDir), "off" disables the cache, anything else is the cache
// directory. Entries are named by the SHA-256 of the compressed file, so a
// regenerated fixture never meets a stale entry, and are written to a
// temporary name and renamed, so concurrent test processes never see a
// partial one. They are sparse (about what the compressed file holds).
const FixtureCacheEnv = "GOBTRFS_FIXTURE_CACHE"

var errNoCache = errors.New("fixture cache disabled")

// cachedFixture returns the path of the decompressed image of the zstd file
// src in the cache, decompressing it there first if needed.
func cachedFixture(src string) (string, error) {
	dir, err := fixtureCacheDir()
	if err != nil {
		return "", err
	}
	sum, size, err := zstdIdentity(src)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, sum+".img")
	if fi, err := os.Stat(path); err == nil && (fi.Size() == size || size < 0) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "tmp-*.img")
	if err != nil {
		return "", err
	}
	tmp.Close()
	os.Remove(tmp.Name()) // decompressSparse creates it exclusively
	if err := decompressFile(src, tmp.Name()); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}

func fixtureCacheDir() (string, error) {
	switch v := os.Getenv(FixtureCacheEnv); v {
	case "off":
		return "", errNoCache
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return "", errNoCache
		}
		return filepath.Join(base, "gobtrfs", "fixtures"), nil
	default:
		return v, nil
	}
}

// zstdIdentity returns the SHA-256 of a zstd file and the decompressed size
// its frame header declares (zstd -19 of a file always records it), or -1
// when it declares none.
func zstdIdentity(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", 0, err
	}
	head := make([]byte, zstd.HeaderMaxSize)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", 0, err
	}
	var zh zstd.Header
	if err := zh.Decode(head[:n]); err != nil {
		return "", 0, err
	}
	if !zh.HasFCS {
		// Streamed compressions (btrfs-progs' fsck images) do not
		// record the size; entries are renamed into place whole, so
		// an existing one is complete.
		return hex.EncodeToString(h.Sum(nil)), -1, nil
	}
	if zh.FrameContentSize > 1<<40 {
		return "", 0, fmt.Errorf("%s: zstd frame declares %d bytes", path, zh.FrameContentSize)
	}
	return hex.EncodeToString(h.Sum(nil)), int64(zh.FrameContentSize), nil
}

// sparseCopy copies src to a new file dst, copying only the data ranges
// (SEEK_DATA/SEEK_HOLE) so holes stay holes.
func sparseCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	ranges, err := dataRanges(int(in.Fd()), fi.Size())
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		if err := copyRange(in, out, r); err != nil {
			out.Close()
			return err
		}
	}
	if err := out.Truncate(fi.Size()); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyRange copies one range at the same offset, with copy_file_range (a
// reflink or in-kernel copy) or, where that is unsupported, read/write.
func copyRange(in, out *os.File, r Range) error {
	off, end := r.Off, r.Off+r.Len
	for off < end {
		roff, woff := off, off
		n, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(end-off), 0)
		if err != nil || n == 0 {
			_, err := io.Copy(io.NewOffsetWriter(out, off), io.NewSectionReader(in, off, end-off))
			return err
		}
		off += int64(n)
	}
	return nil
}
