package btrfs

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// DataError reports file data that could not be read intact from any
// copy. It is not a tree block's damage, so it says which file's data it
// is rather than which tree block; errors.Is(err, ErrCorrupt) holds, and
// the read's own error (which copies failed how) is kept for errors.Is
// and errors.As.
type DataError struct {
	Subvolume uint64 // the subvolume holding the file
	Ino       uint64 // the file's inode number
	Logical   uint64 // logical address of the start of the data read
	// Bad is the first sector whose checksum did not match in any copy;
	// 0 when the read failed otherwise (a device error, a missing device).
	Bad uint64
	Err error
}

// Error names the file (inode and subvolume) and the failing address.
func (e *DataError) Error() string {
	if e.Bad != 0 {
		return fmt.Sprintf("damaged file data: checksum mismatch at logical %d in every copy (inode %d, subvolume %d)",
			e.Bad, e.Ino, e.Subvolume)
	}
	return fmt.Sprintf("file data at logical %d unreadable (inode %d, subvolume %d): %v", e.Logical, e.Ino, e.Subvolume, e.Err)
}

// Unwrap lets errors.Is find ErrCorrupt and the causes of the read.
func (e *DataError) Unwrap() []error { return []error{disk.ErrCorrupt, e.Err} }
