package blockdev

import (
	"fmt"
	"io"
	"os"
)

// File is a Device backed by an image file or a block device. On Linux,
// large aligned writes bypass the page cache (direct_linux.go).
type File struct {
	f        *os.File
	size     int64 // Immutable.
	readOnly bool  // Immutable.
	dio      directIO
}

// Writes of at least directMin bytes at directAlign-aligned offsets and
// lengths go to the device directly where the system allows it, through
// bounce buffers of directChunk bytes.
const (
	directMin   = 256 << 10
	directAlign = 4096
	directChunk = 8 << 20
)

// OpenFile opens an image file or a block device. The size is the file size
// for regular files and the device capacity for block devices (taken from
// the BLKGETSIZE64 ioctl on Linux, from seeking to the end elsewhere). A
// block device opened for writing is opened exclusively (O_EXCL), which
// Linux refuses while the device is mounted or otherwise claimed.
func OpenFile(path string, readOnly bool) (*File, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	} else if st, err := os.Stat(path); err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
		flag |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	size, err := deviceSize(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}
	return &File{f: f, size: size, readOnly: readOnly}, nil
}

// CreateFile creates (or truncates) a sparse image file of the given size
// and opens it read-write.
func CreateFile(path string, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("create %s: negative size %d", path, size)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, size: size}, nil
}

// deviceSize returns the usable size of an open file or block device.
func deviceSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Mode().IsRegular() {
		return st.Size(), nil
	}
	if st.Mode()&os.ModeDevice != 0 {
		if n, ok := blockDeviceSize(f); ok {
			return n, nil
		}
	}
	return seekSize(f)
}

// seekSize finds the size by seeking to the end: portable, and correct for
// block devices on every system where they support seeking.
func seekSize(f *os.File) (int64, error) {
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return n, nil
}

// Name returns the path the file was opened with.
func (d *File) Name() string { return d.f.Name() }

// ReadAt implements Device.
func (d *File) ReadAt(p []byte, off int64) (int, error) {
	n, lim := checkRead(len(p), off, d.size)
	if n == 0 {
		return 0, lim
	}
	got, err := d.f.ReadAt(p[:n], off)
	if err == nil {
		err = lim
	}
	if err == io.EOF && got == len(p) {
		err = nil
	}
	return got, err
}

// WriteAt implements Device.
func (d *File) WriteAt(p []byte, off int64) (int, error) {
	if d.readOnly {
		return 0, ErrReadOnly
	}
	if err := checkWrite(len(p), off, d.size); err != nil {
		return 0, err
	}
	if ok, n, err := d.dio.writeAt(d.f, p, off); ok {
		return n, err
	}
	return d.f.WriteAt(p, off)
}

// Size implements Device.
func (d *File) Size() int64 { return d.size }

// Sync implements Device. A read-only file has nothing to flush.
func (d *File) Sync() error {
	if d.readOnly {
		return nil
	}
	return d.f.Sync()
}

// Close implements Device.
func (d *File) Close() error {
	err := d.dio.close()
	if e := d.f.Close(); e != nil {
		err = e
	}
	return err
}
