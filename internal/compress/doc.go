// Package compress holds the three btrfs data compression codecs: zlib, LZO
// and zstd, as stored in compressed file extents (btrfs-format.md §11).
//
// It is a pure codec layer: it knows nothing of trees, items or devices and
// imports nothing from this module. The read path calls Decompress with an
// extent's stored bytes and its ram_bytes; the write path calls Compress on
// at most 128 KiB of file data and stores the result if it saves a sector.
//
// # What an extent holds
//
// A compressed extent holds the encoding of at most 128 KiB (MaxUncompressed)
// of file data. A regular extent's stored bytes are the stream followed by
// zeros up to disk_num_bytes (a sector multiple, at most 128 KiB); an inline
// extent's payload is the bare stream. ram_bytes is the decoded size, rounded
// up to a sector for a file's last extent, whose stream decodes to fewer
// bytes: the rest reads as zeros.
//
// zlib (type 1): one RFC 1950 stream. The kernel writes level 3 (header
// 78 5E). Its reader checks the 2-byte header, inflates raw deflate and never
// verifies the Adler-32 trailer, so neither does Decompress.
//
// LZO (type 2): btrfs framing around LZO1X-1 streams:
//
//	+--------------+--------+-----------+--------+-----------+----+--------+-----
//	| total (LE32) | len0   | LZO1X     | len1   | LZO1X     |0..3| len2   | ...
//	| incl. itself | (LE32) | sector 0  | (LE32) | sector 1  |zero| (LE32) |
//	+--------------+--------+-----------+--------+-----------+----+--------+-----
//	                                                              ^ sector boundary
//
// Each sector of input is compressed on its own into one segment that
// decodes to exactly one sector (the last may be shorter). Segment payloads
// may cross sector boundaries but a 4-byte header never does: when fewer than
// 4 bytes remain in a sector after a segment, they are zero and the next
// header starts at the next sector. The reader enforces the kernel's checks:
// total <= min(128 KiB, stored length), round_up(total, sector) >= stored
// length, and each segment no longer than lzo1x_worst_compress(sector)
// (n + n/16 + 64 + 3: 4419 bytes for 4 KiB sectors) and decoding to at most
// one sector. The LZO1X codec is written here (lzo1x.go describes the stream
// format); its encoder's streams differ from liblzo2's but decode with it.
// Linux 6.18 was checked to read extents written by Compress for all three
// codecs (testdata/README.md).
//
// zstd (type 3): one zstd frame, then zero padding that must not be taken for
// another frame. The reader walks the frame's block headers to find its end
// and decodes only it, rejecting windows above 128 KiB as the kernel does.
// The writer makes single-segment frames with the content size and no
// checksum, like the kernel's, so the window equals the data size.
//
// # Guarantees
//
// Decompress treats src as hostile: every error it returns for bad data
// wraps ErrCorrupt and says which codec and where; it never panics, works in
// time linear in the input and output sizes, and allocates little beyond
// dst. Like the kernel, it stops once dst is full (extra output is ignored)
// and ignores bytes after the end of the stream.
//
// Decompress and Compress are safe for concurrent use and are the hot-path
// API: decoders and encoders are expensive to build, so they live in
// process-wide pools (a shared zstd DecodeAll decoder running up to
// GOMAXPROCS decodes at once, sync.Pools of flate readers, zlib writers,
// streaming zstd decoders and LZO scratch, one zstd encoder per speed class).
// A steady-state 128 KiB decode allocates nothing for LZO and at most a few
// KiB for zlib and zstd.
//
// This package must never read or write anything but its arguments, keep
// references to caller buffers after returning, or decode more than one
// zstd frame per extent.
package compress
