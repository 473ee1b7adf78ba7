package btrfs

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Resize commits the running changes and then makes device devid size
// bytes long in a transaction of its own, as `btrfs filesystem resize
// devid:size` does on a mount. It returns the device's size before.
//
// Growing needs the device to hold size bytes already: an image file is
// extended before the filesystem is opened (os.Truncate; the command
// does so). The device item, the superblock's sizes and the new
// superblock mirrors (64 MiB, 256 GiB) are written by the commit, and the
// new bytes take chunks as the others do.
//
// Shrinking removes the chunks past the new end and moves what they hold
// below it, or (on a filesystem of several devices) to chunks with
// stripes on the devices that have room; see docs/design/0018-resize.md
// for what can move. The device's image file is then truncated to size.
// size is
// rounded down to a multiple of 64 KiB when shrinking (whole chunk
// stripe elements) and to the sector size when growing. On an error the
// filesystem on disk is as the last commit left it.
func (fsys *FS) Resize(devid uint64, size uint64) (old uint64, err error) {
	w, err := fsys.writable("resize", ".")
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil {
		return 0, &fs.PathError{Op: "resize", Path: w.path, Err: fmt.Errorf("%w: %w", ErrAborted, w.dead)}
	}
	old, path, err := fsys.deviceTotal(devid)
	if err != nil {
		return 0, err
	}
	if err := fsys.commitDurableLocked(); err != nil {
		return old, err
	}
	// Reads of older views may still read what the resize moves or
	// frees (read_view.go).
	fsys.drainReads()
	sb := w.tfs.Super()
	grow := size > old
	if grow {
		size = size / uint64(sb.SectorSize) * uint64(sb.SectorSize)
	} else {
		size = size / (64 << 10) * (64 << 10)
	}
	if size == old {
		return old, nil
	}
	t, err := w.tfs.Begin()
	if err != nil {
		return old, &fs.PathError{Op: "resize", Path: w.path, Err: err}
	}
	if grow {
		err = t.Grow(disk.DevID(devid), size)
	} else {
		err = t.ShrinkDevice(disk.DevID(devid), size)
	}
	if err != nil {
		t.Abort()
		return old, &fs.PathError{Op: "resize", Path: w.path, Err: err}
	}
	if err := t.Commit(); err != nil {
		w.dead = err
		return old, &fs.PathError{Op: "resize", Path: w.path, Err: err}
	}
	if err := fsys.followCommit(); err != nil {
		return old, err
	}
	fsys.drainReads() // none reads past the new end when it is cut off
	if !grow {
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && uint64(fi.Size()) > size {
			if err := os.Truncate(path, int64(size)); err != nil {
				return old, err
			}
		}
	}
	return old, nil
}

// deviceTotal is the committed size of device devid and the path it was
// opened from, or an error naming the devices there are.
func (fsys *FS) deviceTotal(devid uint64) (uint64, string, error) {
	devs, err := fsys.devices()
	if err != nil {
		return 0, "", err
	}
	for _, d := range devs {
		if d.ID == devid {
			if d.Missing {
				return 0, "", &fs.PathError{Op: "resize", Path: fsys.w.path, Err: fmt.Errorf("device %d is missing", devid)}
			}
			return d.TotalBytes, d.Path, nil
		}
	}
	return 0, "", &fs.PathError{Op: "resize", Path: fsys.w.path, Err: fmt.Errorf("invalid device id %d", devid)}
}
