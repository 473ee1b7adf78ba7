package btrfs

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// SubvolumeInfoOf returns the description of subvolume id, the top level
// (5, path "", parent 0) included, as `btrfs subvolume show` needs it.
// A missing id, or one being deleted, is fs.ErrNotExist.
func (fsys *FS) SubvolumeInfoOf(id uint64) (*SubvolumeInfo, error) {
	fsys, done := fsys.reader()
	defer done()
	if !disk.ObjectID(id).IsFSTree() {
		return nil, fmt.Errorf("subvolume %d: %w", id, fs.ErrNotExist)
	}
	info, found, err := fsys.subvolumeInfo(disk.ObjectID(id))
	if errors.Is(err, errNoRoot) {
		found, err = false, nil
	}
	if err != nil {
		return nil, fmt.Errorf("subvolume %d: %w", id, err)
	}
	if !found {
		return nil, fmt.Errorf("subvolume %d: %w", id, fs.ErrNotExist)
	}
	return info, nil
}
