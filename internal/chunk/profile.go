package chunk

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Profile is the replication scheme of a chunk.
type Profile uint8

// Profiles, one per block group profile bit (Single has none).
const (
	Single Profile = iota
	DUP
	RAID0
	RAID1
	RAID1C3
	RAID1C4
	RAID10
	RAID5
	RAID6
)

// ProfileOf returns the profile of block group flags, or false if several
// profile bits are set.
func ProfileOf(flags uint64) (Profile, bool) {
	switch flags & disk.BlockGroupProfileMask {
	case 0:
		return Single, true
	case disk.BlockGroupDUP:
		return DUP, true
	case disk.BlockGroupRAID0:
		return RAID0, true
	case disk.BlockGroupRAID1:
		return RAID1, true
	case disk.BlockGroupRAID1C3:
		return RAID1C3, true
	case disk.BlockGroupRAID1C4:
		return RAID1C4, true
	case disk.BlockGroupRAID10:
		return RAID10, true
	case disk.BlockGroupRAID5:
		return RAID5, true
	case disk.BlockGroupRAID6:
		return RAID6, true
	}
	return 0, false
}

// String returns the lower-case name btrfs-progs uses (single, dup, raid0...).
func (p Profile) String() string {
	switch p {
	case Single:
		return "single"
	case DUP:
		return "dup"
	case RAID0:
		return "raid0"
	case RAID1:
		return "raid1"
	case RAID1C3:
		return "raid1c3"
	case RAID1C4:
		return "raid1c4"
	case RAID10:
		return "raid10"
	case RAID5:
		return "raid5"
	case RAID6:
		return "raid6"
	}
	return fmt.Sprintf("profile(%d)", uint8(p))
}

// Mirrored reports whether every stripe holds the whole chunk (SINGLE, DUP,
// RAID1, RAID1C3, RAID1C4).
func (p Profile) Mirrored() bool {
	switch p {
	case Single, DUP, RAID1, RAID1C3, RAID1C4:
		return true
	}
	return false
}

// Parity is the number of parity stripes per row: 1 for RAID5, 2 for RAID6,
// 0 otherwise.
func (p Profile) Parity() int {
	switch p {
	case RAID5:
		return 1
	case RAID6:
		return 2
	}
	return 0
}
