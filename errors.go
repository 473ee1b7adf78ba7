package btrfs

import (
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// ErrCorrupt is matched (errors.Is) by every error caused by damaged or
// invalid on-disk data.
var ErrCorrupt = disk.ErrCorrupt

// ErrMissingDevice is matched when a read needed a device that was not
// given and no other copy or parity could serve it.
var ErrMissingDevice = chunk.ErrDeviceMissing

// ErrUnsupported is returned for filesystems and changes gobtrfs cannot
// handle (yet) without risking the image, such as shrinking a
// multi-device filesystem. Nothing is changed.
var ErrUnsupported = txn.ErrUnsupported
