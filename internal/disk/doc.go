// Package disk is the btrfs on-disk format: the only package that knows
// byte layouts. Everything above it works with the typed values it decodes.
//
// Layout of the pieces this package describes (all integers little-endian,
// all structs packed):
//
//	superblock (4096 bytes at physical 64 KiB, 64 MiB, 256 GiB of every device)
//	+--------+------+--------+-------+-----------+-----+-----------------+--------------+
//	| csum32 | fsid | bytenr | flags | magic ... | ... | sys_chunk_array | backup roots |
//	+--------+------+--------+-------+-----------+-----+-----------------+--------------+
//	0        0x20   0x30     0x38    0x40              0x32b             0xb2b
//
//	tree block (nodesize bytes at a logical address)
//	+------------------- header (101) --------------------+
//	| csum | fsid | bytenr | flags | chunk uuid | gen | owner | nritems | level |
//	+-----------------------------------------------------+
//	leaf (level 0):  item headers grow up from byte 101, item data grows down
//	                 from the end; item i = key(17) offset(4) size(4), where
//	                 offset is relative to byte 101.
//	node (level>0):  key pointers from byte 101: key(17) blockptr(8) generation(8)
//
// Invariants this package keeps:
//   - Decoding never panics and never allocates a length read from disk before
//     checking it against the buffer it came from; bad input yields an error
//     wrapping ErrCorrupt that says what was wrong and where.
//   - Encoding into a buffer that is too small is a programming error and
//     panics; encoders never fail on valid values.
//   - Decode followed by Encode reproduces the input bytes exactly (reserved
//     and unknown fields are kept).
//
// This package must never import anything else from the module, do I/O, or
// hold state: it is pure functions and plain values.
package disk
