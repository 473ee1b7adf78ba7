package fileio

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/gobtrfs/btrfs"
)

// PrepareResult is what Prepare did.
type PrepareResult struct {
	Files        int     `json:"files"`         // files created or extended
	Reused       int     `json:"reused"`        // files already full size, left alone
	BytesWritten int64   `json:"bytes_written"` // file data written
	Seconds      float64 `json:"seconds"`
}

// Prepare makes the files of c in its image as sysbench's prepare does:
// test_file.0 .. test_file.N-1, each created if missing and written up to
// FileTotalSize/FileNum bytes in FileBlockSize writes from where it ends,
// then fsynced; a file already that long is reused. For seqwr, which
// writes the files from nothing, they are removed and created empty
// instead (sysbench's prepare removes them and its run creates them, but
// here both runs of a comparison must start from the same image).
func Prepare(c Config) (PrepareResult, error) {
	var res PrepareResult
	r, err := c.resolve()
	if err != nil {
		return res, err
	}
	fsys, err := btrfs.OpenWritable(r.Image, nil)
	if err != nil {
		return res, err
	}
	start := time.Now()
	buf := make([]byte, r.FileBlockSize)
	for i := range r.FileNum {
		name := fileName(i)
		if err := prepareFile(fsys, &r, i, buf, &res); err != nil {
			fsys.Close()
			return res, fmt.Errorf("prepare %s: %w", name, err)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if err := fsys.Sync(); err != nil {
		fsys.Close()
		return res, err
	}
	return res, fsys.Close()
}

// prepareFile creates or extends file i, and fsyncs it as sysbench does.
func prepareFile(fsys *btrfs.FS, r *resolved, i int, buf []byte, res *PrepareResult) error {
	name := fileName(i)
	st, err := fsys.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case r.Mode == SeqWr:
		if err := fsys.Remove(name); err != nil {
			return err
		}
	case st.Size() >= r.fileSize:
		res.Reused++
		return nil
	}
	var size int64
	if st == nil || r.Mode == SeqWr {
		if err := fsys.CreateEmpty(name, 0o600); err != nil {
			return err
		}
	} else {
		size = st.Size()
	}
	res.Files++
	if r.Mode == SeqWr {
		return fsys.Sync()
	}
	for off := size; off < r.fileSize; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), r.fileSize-off)]
		if r.Verify {
			fillBlock(p, i, off, 0)
		}
		if _, err := fsys.WriteAt(name, p, off); err != nil {
			return err
		}
		res.BytesWritten += int64(len(p))
	}
	return fsys.Sync()
}
