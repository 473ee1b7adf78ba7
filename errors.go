package btrfs

import (
	"errors"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrCorrupt is matched (errors.Is) by every error caused by damaged or
// invalid on-disk data.
var ErrCorrupt = disk.ErrCorrupt

// ErrMissingDevice is matched when a read needs a device that was not given
// and no other copy could serve it.
var ErrMissingDevice = errors.New("device missing")

// ErrNotBtrfs is matched when a device holds no btrfs superblock.
var ErrNotBtrfs = errors.New("not a btrfs filesystem")
