package btrfs

import "github.com/gobtrfs/btrfs/internal/disk"

// UUID is a 16-byte btrfs identifier (filesystem, device, subvolume),
// in the byte order btrfs stores it.
type UUID [16]byte

// String prints u in the usual 8-4-4-4-12 form.
func (u UUID) String() string { return disk.UUID(u).String() }

// IsZero reports whether every byte is zero.
func (u UUID) IsZero() bool { return u == UUID{} }

// ParseUUID parses the 8-4-4-4-12 form String prints.
func ParseUUID(s string) (UUID, error) {
	u, err := disk.ParseUUID(s)
	return UUID(u), err
}
