package mkfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gobtrfs/btrfs/internal/blockdev"
)

// undo is how Build puts the target back when it fails after starting
// to write: an image it created is removed; an existing regular file
// gets its bytes, size and times back from a copy of its data taken
// before. The copy is a clone where the host can make one (btrfs, xfs);
// elsewhere holes and chunks of zeros are not copied, so the usual
// targets, a fresh file from truncate(1) or dd from /dev/zero, cost a
// read at most. Re-making an image full of data costs a copy of it. A
// block device cannot be put back and is left as the failure left it.
type undo struct {
	path    string
	created bool
	backup  *os.File // the original's data, at the same offsets
	size    int64
	atime   time.Time
	mtime   time.Time
	ranges  [][2]int64 // data ranges of the original
}

// prepareUndo records how to put path back; call it just before the
// first write.
func prepareUndo(path string) (*undo, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return &undo{path: path, created: true}, nil
	}
	if err != nil || !fi.Mode().IsRegular() {
		return &undo{path: path}, err
	}
	// The access time is not kept portably; the modification time
	// stands in for it.
	u := &undo{path: path, size: fi.Size(), mtime: fi.ModTime(), atime: fi.ModTime()}
	src, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	segs, err := dataSegments(src, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("mkfs: %s: %w", path, err)
	}
	if len(segs) == 0 {
		return u, nil
	}
	if u.backup, err = os.CreateTemp(filepath.Dir(path), ".gobtrfs-mkfs-undo-*"); err != nil {
		if u.backup, err = os.CreateTemp("", "gobtrfs-mkfs-undo-*"); err != nil {
			return nil, fmt.Errorf("mkfs: keep a copy of %s to restore on failure: %w", path, err)
		}
	}
	os.Remove(u.backup.Name()) // lives while open
	if cloneFile(u.backup, src) {
		// A host that clones (btrfs, xfs) keeps the copy for free.
		for _, sg := range segs {
			u.ranges = append(u.ranges, [2]int64{sg.Off, sg.Off + sg.Len})
		}
		return u, nil
	}
	if err := u.saveNonZero(src, segs); err != nil {
		u.backup.Close()
		return nil, fmt.Errorf("mkfs: keep a copy of %s to restore on failure: %w", path, err)
	}
	return u, nil
}

// undoChunk is the unit saveNonZero copies or skips.
const undoChunk = 1 << 20

// saveNonZero copies the data ranges of src to the backup at their
// offsets, skipping chunks of zeros: a target made with dd from
// /dev/zero has all its bytes allocated, and a hole reads the same.
func (u *undo) saveNonZero(src *os.File, segs []Segment) error {
	buf := make([]byte, undoChunk)
	for _, sg := range segs {
		for off := sg.Off; off < sg.Off+sg.Len; {
			n := min(int64(len(buf)), sg.Off+sg.Len-off)
			if _, err := src.ReadAt(buf[:n], off); err != nil {
				return err
			}
			if !allZero(buf[:n]) {
				if _, err := u.backup.WriteAt(buf[:n], off); err != nil {
					return err
				}
				if k := len(u.ranges) - 1; k >= 0 && u.ranges[k][1] == off {
					u.ranges[k][1] = off + n
				} else {
					u.ranges = append(u.ranges, [2]int64{off, off + n})
				}
			}
			off += n
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// done drops the copy after a successful build.
func (u *undo) done() {
	if u != nil && u.backup != nil {
		u.backup.Close()
	}
}

// restore puts the target back after a failed build and says so in the
// error.
func (u *undo) restore(buildErr error) error {
	if u == nil || errors.Is(buildErr, blockdev.ErrLocked) || errors.Is(buildErr, blockdev.ErrMounted) {
		// Refused before anything was written: the target is someone
		// else's (the kernel's, another writer's) and stays untouched.
		u.done()
		return buildErr
	}
	defer u.done()
	if u.created {
		if err := os.Remove(u.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errors.Join(buildErr, fmt.Errorf("mkfs: remove the unfinished %s: %w", u.path, err))
		}
		return buildErr
	}
	if u.mtime.IsZero() {
		return buildErr // a block device
	}
	if err := u.copyBack(); err != nil {
		return errors.Join(buildErr, fmt.Errorf("mkfs: restore %s: %w", u.path, err))
	}
	return buildErr
}

// copyBack empties the file (its inode stays: links and open loop
// devices still see it) and writes the saved ranges at their offsets.
func (u *undo) copyBack() error {
	f, err := os.OpenFile(u.path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(u.size); err != nil {
		f.Close()
		return err
	}
	for _, r := range u.ranges {
		if _, err := io.Copy(io.NewOffsetWriter(f, r[0]), io.NewSectionReader(u.backup, r[0], r[1]-r[0])); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(u.path, u.atime, u.mtime)
}
