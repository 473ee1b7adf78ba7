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
// image file is truncated to the new size; on a block device the
// superblock mirrors past the new end are left as they were (the kernel
// only reads mirrors inside total_bytes). It returns the new size in
// bytes. Single-device filesystems only (ErrUnsupported, before anything
// is committed); the image is then full, so it needs Resize (`gobtrfs
// filesystem resize`, or the kernel's on a larger file) before it can take
// much more. Resize shrinks to a given size, moving what is in the way.
func (fsys *FS) Shrink() (int64, error) {
	w, err := fsys.writable("shrink", ".")
	if err != nil {
		return 0, err
	}
	if len(w.opts.Devices) > 0 {
		return 0, &fs.PathError{Op: "shrink", Path: w.path, Err: fmt.Errorf("%w: more than one device", ErrUnsupported)}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	size, err := fsys.shrinkLocked(w)
	if err != nil {
		return 0, err
	}
	fsys.drainReads() // none reads past the new end when it is cut off
	var terr error
	if fi, err := os.Stat(w.path); err == nil && fi.Mode().IsRegular() && uint64(fi.Size()) > size {
		terr = os.Truncate(w.path, int64(size))
	}
	return int64(size), terr
}

// shrinkLocked commits the running transaction, then shrinks in a
// transaction of its own, with w.mu held throughout so no change slips in
// between.
func (fsys *FS) shrinkLocked(w *writer) (uint64, error) {
	if err := fsys.commitDurableLocked(); err != nil {
		return 0, err
	}
	// Reads of older views may still read what the shrink moves or
	// frees (read_view.go).
	fsys.drainReads()
	t, err := w.tfs.Begin()
	if err != nil {
		return 0, &fs.PathError{Op: "shrink", Path: w.path, Err: err}
	}
	size, err := t.Shrink()
	if err != nil {
		t.Abort()
		return 0, &fs.PathError{Op: "shrink", Path: w.path, Err: err}
	}
	if err := t.Commit(); err != nil {
		w.dead = err
		return 0, &fs.PathError{Op: "shrink", Path: w.path, Err: err}
	}
	return size, fsys.followCommit()
}
