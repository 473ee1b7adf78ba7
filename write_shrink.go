package btrfs

import (
	"fmt"
	"io/fs"
	"os"
)

// Shrink commits the running changes and then makes the filesystem as
// small as it can be without moving anything: empty chunks at the end of
// the device go, the last chunk is cut to its last used byte, and the
// device and superblock sizes follow (like `mkfs.btrfs --shrink`). An
// image file is truncated to the new size. It returns the new size in
// bytes. Single-device filesystems only; the image is then full, so the
// kernel needs `btrfs filesystem resize` on a larger file before it can
// write much.
func (fsys *FS) Shrink() (int64, error) {
	if err := fsys.Commit(); err != nil {
		return 0, err
	}
	w, err := fsys.writable("shrink", ".")
	if err != nil {
		return 0, err
	}
	if len(w.opts.Devices) > 0 {
		return 0, &fs.PathError{Op: "shrink", Path: w.path, Err: fmt.Errorf("%w: more than one device", ErrUnsupported)}
	}
	var size uint64
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return 0, ErrAborted
	}
	t, err := w.tfs.Begin()
	if err == nil {
		if size, err = t.Shrink(); err == nil {
			err = t.Commit()
		} else {
			t.Abort()
		}
	}
	if err != nil {
		w.dead = err
		w.mu.Unlock()
		return 0, &fs.PathError{Op: "shrink", Path: w.path, Err: err}
	}
	w.mu.Unlock()
	if fi, err := os.Stat(w.path); err == nil && fi.Mode().IsRegular() && uint64(fi.Size()) > size {
		if err := os.Truncate(w.path, int64(size)); err != nil {
			return 0, err
		}
	}
	return int64(size), fsys.reload()
}
