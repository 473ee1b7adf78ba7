package disk

import (
	"crypto/sha256"
	"fmt"
	"hash/crc32"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/crypto/blake2b"
)

// CsumType is the superblock csum_type: the algorithm for every checksum in
// the filesystem (superblocks, tree blocks, data sectors).
type CsumType uint16

// Checksum algorithms.
const (
	CsumCRC32C CsumType = 0 // BTRFS_CSUM_TYPE_CRC32
	CsumXXHash CsumType = 1 // BTRFS_CSUM_TYPE_XXHASH (XXH64, seed 0)
	CsumSHA256 CsumType = 2 // BTRFS_CSUM_TYPE_SHA256
	CsumBlake2 CsumType = 3 // BTRFS_CSUM_TYPE_BLAKE2 (BLAKE2b-256, unkeyed)
)

// CsumFieldSize is the room reserved for a checksum in headers and superblocks.
const CsumFieldSize = 32

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Valid reports whether t is a known algorithm.
func (t CsumType) Valid() bool { return t <= CsumBlake2 }

// Size is the number of checksum bytes this algorithm stores.
func (t CsumType) Size() int {
	switch t {
	case CsumCRC32C:
		return 4
	case CsumXXHash:
		return 8
	case CsumSHA256, CsumBlake2:
		return 32
	}
	return 0
}

// String returns the name btrfs-progs prints (crc32c, xxhash64, sha256, blake2b).
func (t CsumType) String() string {
	switch t {
	case CsumCRC32C:
		return "crc32c"
	case CsumXXHash:
		return "xxhash64"
	case CsumSHA256:
		return "sha256"
	case CsumBlake2:
		return "blake2b"
	}
	return fmt.Sprintf("unknown(%d)", uint16(t))
}

// Sum appends the checksum of data to dst (t.Size() bytes) and returns it.
// An unknown type appends nothing.
func (t CsumType) Sum(dst, data []byte) []byte {
	switch t {
	case CsumCRC32C:
		return le.AppendUint32(dst, crc32.Checksum(data, castagnoli))
	case CsumXXHash:
		return le.AppendUint64(dst, xxhash.Sum64(data))
	case CsumSHA256:
		s := sha256.Sum256(data)
		return append(dst, s[:]...)
	case CsumBlake2:
		s := blake2b.Sum256(data)
		return append(dst, s[:]...)
	}
	return dst
}

// CRC32C is the standard CRC-32C (Castagnoli) checksum.
func CRC32C(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// crc32cRaw is the reflected CRC-32C register update with no final inversion:
// the form btrfs uses for its hashes. crc32.Update inverts on entry and exit,
// so undoing both gives the raw register arithmetic.
func crc32cRaw(seed uint32, data []byte) uint32 {
	return ^crc32.Update(^seed, castagnoli, data)
}

// NameHash is the DIR_ITEM and XATTR_ITEM key offset for name.
func NameHash(name []byte) uint64 { return uint64(crc32cRaw(0xFFFFFFFE, name)) }

// ExtrefHash is the INODE_EXTREF key offset for (parent, name).
func ExtrefHash(parent ObjectID, name []byte) uint64 {
	return uint64(crc32cRaw(uint32(parent), name))
}

// DataRefHash is the EXTENT_DATA_REF key offset and ordering value for a
// data back-reference (root, inode, offset). Note the shift by 31.
func DataRefHash(root, ino ObjectID, offset uint64) uint64 {
	var b [8]byte
	le.PutUint64(b[:], uint64(root))
	hi := crc32cRaw(0xFFFFFFFF, b[:])
	le.PutUint64(b[:], uint64(ino))
	lo := crc32cRaw(0xFFFFFFFF, b[:])
	le.PutUint64(b[:], offset)
	lo = crc32cRaw(lo, b[:])
	return uint64(hi)<<31 ^ uint64(lo)
}

// SumBlock computes the checksum of a tree block or superblock (bytes 32 to
// the end) into its first CsumFieldSize bytes, zeroing the unused rest.
func (t CsumType) SumBlock(block []byte) {
	var buf [CsumFieldSize]byte
	s := t.Sum(buf[:0], block[CsumFieldSize:])
	copy(block[:CsumFieldSize], s)
	clear(block[len(s):CsumFieldSize])
}

// VerifyBlock reports whether the checksum stored at the start of a tree
// block or superblock matches its contents.
func (t CsumType) VerifyBlock(block []byte) bool {
	if len(block) < CsumFieldSize || !t.Valid() {
		return false
	}
	var buf [CsumFieldSize]byte
	s := t.Sum(buf[:0], block[CsumFieldSize:])
	for i := range s {
		if s[i] != block[i] {
			return false
		}
	}
	return true
}
