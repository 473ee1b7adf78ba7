package compress

import (
	"errors"
	"fmt"
)

// Type is the compression byte of an EXTENT_DATA item (file extent item
// offset 16): how the extent's stored bytes are encoded.
type Type uint8

// Compression types, numbered as on disk.
const (
	None Type = 0 // stored as is
	Zlib Type = 1 // zlib stream (RFC 1950)
	LZO  Type = 2 // btrfs segment framing around LZO1X streams
	Zstd Type = 3 // one zstd frame (RFC 8878)
)

// String returns the name btrfs tools use for the type ("none", "zlib",
// "lzo", "zstd"), or "compress(N)" for a value no kernel defines.
func (t Type) String() string {
	switch t {
	case None:
		return "none"
	case Zlib:
		return "zlib"
	case LZO:
		return "lzo"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("compress(%d)", uint8(t))
}

// Valid reports whether t is one of the four types the format defines.
func (t Type) Valid() bool { return t <= Zstd }

// ErrCorrupt is wrapped by every error Decompress returns for input that does
// not decode. The lead will make it alias disk.ErrCorrupt, so callers should
// test with errors.Is.
var ErrCorrupt = errors.New("corrupt compressed data")

// Size limits of compressed extents (BTRFS_MAX_UNCOMPRESSED and
// BTRFS_MAX_COMPRESSED): the kernel compresses at most 128 KiB of file data
// into one extent and never reads more than 128 KiB of compressed bytes.
const (
	MaxUncompressed = 128 << 10
	MaxCompressed   = 128 << 10
)

// Default levels used when Compress is given level 0 (the kernel's defaults).
const (
	DefaultZlibLevel = 3
	DefaultZstdLevel = 3
)

// corruptf returns an error wrapping ErrCorrupt; the message names the codec
// and where in the extent the problem is.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// checkSectorSize rejects sector sizes btrfs cannot have: a power of two
// from 512 to 64 KiB (mkfs uses 4 KiB or the page size). A bad value is a
// caller bug, not corrupt data, so the error does not wrap ErrCorrupt.
func checkSectorSize(sectorSize int) error {
	if sectorSize < 512 || sectorSize > 64<<10 || sectorSize&(sectorSize-1) != 0 {
		return fmt.Errorf("compress: invalid sector size %d", sectorSize)
	}
	return nil
}

// roundUp rounds n up to a multiple of the power of two align.
func roundUp(n, align int) int { return (n + align - 1) &^ (align - 1) }

// Decompress decodes one extent's stored bytes src into dst.
//
// src is what the extent holds on disk (disk_num_bytes bytes for a regular
// extent, so it may carry zero padding after the stream up to the sector
// multiple) or the inline item's payload. dst has exactly the length the
// caller wants, normally ram_bytes. Its contents on entry do not matter: on
// success dst holds the first len(dst) decoded bytes, and if the stream
// decodes to fewer bytes the rest of dst is zeroed (the kernel does the same
// for a file's last extent, whose ram_bytes is rounded up to a sector). Bytes
// a stream would produce beyond len(dst) are ignored, as the kernel stops
// once the read is satisfied. Bytes after the end of the stream in src are
// ignored. sectorSize is the filesystem's sector size; LZO segments decode to
// one sector each.
//
// Errors for bad input wrap ErrCorrupt; dst's contents are then unspecified.
// Decompress never panics, runs in time linear in len(src)+len(dst), and
// allocates at most len(dst) plus a bounded amount of pooled codec state. It
// is safe for concurrent use: codec state (zstd decoders, flate readers, LZO
// scratch) lives in process-wide pools, so no per-caller decoder object is
// needed on hot paths.
func Decompress(t Type, dst, src []byte, sectorSize int) error {
	if err := checkSectorSize(sectorSize); err != nil {
		return err
	}
	var n int
	var err error
	switch t {
	case None:
		n = copy(dst, src)
	case Zlib:
		n, err = decompressZlib(dst, src)
	case LZO:
		n, err = decompressLZO(dst, src, sectorSize)
	case Zstd:
		n, err = decompressZstd(dst, src)
	default:
		return corruptf("unknown compression type %d", uint8(t))
	}
	if err != nil {
		return err
	}
	clear(dst[n:])
	return nil
}

// Compress encodes src (at most MaxUncompressed bytes) as type t for storage
// in an extent and returns the stream without sector padding.
//
// level 0 means the codec default (zlib 3, zstd 3); zlib accepts 1..9, zstd
// -15..15 (mapped onto the encoder's speed classes), and LZO has no levels and
// ignores it. ok reports whether compression pays under the kernel's rule:
// the compressed size rounded up to a sector, plus one sector, must not
// exceed the input rounded up to a sector. When ok is false the caller stores
// the data uncompressed in a regular extent; out is still returned and valid,
// because inline extents follow their own rule (the kernel may inline a
// compressed stream of a small file even when no sector is saved). For None,
// Compress returns (nil, false, nil).
//
// Compress is safe for concurrent use; encoders are pooled per level. The
// returned slice is newly allocated and owned by the caller.
func Compress(t Type, src []byte, level int, sectorSize int) (out []byte, ok bool, err error) {
	if err := checkSectorSize(sectorSize); err != nil {
		return nil, false, err
	}
	if len(src) > MaxUncompressed {
		return nil, false, fmt.Errorf("compress: %d bytes exceed the %d-byte extent limit", len(src), MaxUncompressed)
	}
	switch t {
	case None:
		return nil, false, nil
	case Zlib:
		out, err = compressZlib(src, level)
	case LZO:
		out = compressLZO(src, sectorSize)
	case Zstd:
		out, err = compressZstd(src, level)
	default:
		return nil, false, fmt.Errorf("compress: unknown compression type %d", uint8(t))
	}
	if err != nil {
		return nil, false, err
	}
	return out, SavesSector(len(src), len(out), sectorSize), nil
}

// SavesSector reports whether storing rawLen bytes as compressedLen bytes
// saves at least one sector, the kernel's condition for keeping a compressed
// regular extent (compress_file_range). sectorSize must be a power of two.
func SavesSector(rawLen, compressedLen, sectorSize int) bool {
	return roundUp(compressedLen, sectorSize)+sectorSize <= roundUp(rawLen, sectorSize)
}
