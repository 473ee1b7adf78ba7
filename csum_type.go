package btrfs

import (
	"fmt"
	"strings"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// CsumType is a checksum algorithm of btrfs (the superblock's csum_type),
// for data and metadata alike. The zero value is crc32c, the default of
// mkfs.btrfs.
type CsumType uint16

// The checksum algorithms btrfs defines, with their on-disk numbers.
const (
	CsumCRC32C CsumType = 0
	CsumXXHash CsumType = 1 // XXH64
	CsumSHA256 CsumType = 2
	CsumBlake2 CsumType = 3 // BLAKE2b-256
)

// The on-disk numbers are the format's; a mismatch stops the build.
var _ = [1]struct{}{}[CsumCRC32C-CsumType(disk.CsumCRC32C)+CsumXXHash-CsumType(disk.CsumXXHash)+
	CsumSHA256-CsumType(disk.CsumSHA256)+CsumBlake2-CsumType(disk.CsumBlake2)]

// String returns the name btrfs-progs prints: crc32c, xxhash64, sha256,
// blake2b, or unknown(N).
func (t CsumType) String() string { return disk.CsumType(t).String() }

// ParseCsumType parses an algorithm as mkfs.btrfs --csum takes it
// (case-insensitive): crc32c, xxhash or xxhash64, sha256, blake2 or
// blake2b. The empty string is crc32c.
func ParseCsumType(s string) (CsumType, error) {
	switch strings.ToLower(s) {
	case "crc32c", "":
		return CsumCRC32C, nil
	case "xxhash", "xxhash64":
		return CsumXXHash, nil
	case "sha256":
		return CsumSHA256, nil
	case "blake2", "blake2b":
		return CsumBlake2, nil
	}
	return 0, fmt.Errorf("checksum %q: one of crc32c, xxhash, sha256, blake2", s)
}
