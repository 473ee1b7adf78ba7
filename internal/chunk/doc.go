// Package chunk translates btrfs logical addresses to device offsets and
// reads logical ranges back, falling back to mirrors and rebuilding from
// RAID5/RAID6 parity when a copy is missing, unreadable or fails the
// caller's verification.
//
// A Map holds the chunks (CHUNK_ITEMs), sorted by logical start and never
// overlapping. It is bootstrapped from the superblock's sys_chunk_array
// (AddSysChunks), which is enough to read the chunk tree; the caller then
// walks the chunk tree and Adds every CHUNK_ITEM. Re-adding a chunk that is
// already present with identical contents is accepted, because every SYSTEM
// chunk appears in both places.
//
// Mapping formulas (stripe length S = 65536, off = logical - chunk start,
// nr = off / S, in = off % S, n = number of stripes):
//
//	SINGLE, DUP, RAID1, RAID1C3, RAID1C4  every stripe k: stripe[k] + off
//	RAID0            k = nr mod n, row = nr / n: stripe[k] + row*S + in
//	RAID10 (sub 2)   f = n/sub, k = (nr mod f)*sub + m (m < sub), row = nr / f
//	RAID5/6 (p=1/2)  d = n-p, j = nr mod d, row = nr / d, k = (row+j) mod n;
//	                 P on (row+d) mod n, Q on (row+d+1) mod n;
//	                 P = XOR of the d data blocks of the row,
//	                 Q = sum of g^j * D_j over GF(2^8), polynomial 0x11D, g = 2
//
// A "stripe element" is the range a single device holds contiguously: the
// whole chunk for the mirrored profiles, one S-sized, S-aligned block for the
// striped ones. Mappings never cross an element.
//
// Invariants:
//   - Chunks in a Map passed disk.ChunkItem.Validate, have NumStripes equal
//     to len(Stripes), and neither logical nor physical ranges overflow
//     2^63, so no arithmetic on them wraps.
//   - Hostile chunk items never cause a panic, and no allocation is sized by
//     a value read from disk beyond what the chunk item's own size implies.
//   - Reader allocates only buffers bounded by the request size and the
//     stripe length (parity rebuilds use four S-sized scratch buffers,
//     pooled).
//
// Writer writes logical ranges to every copy, and for RAID5/6 recomputes
// the row's P and Q (read-modify-write); it never writes degraded: a write
// needing a missing device fails before anything is written. Reader never
// writes. The package knows nothing about trees: the caller supplies chunk
// items and a verification callback.
package chunk
