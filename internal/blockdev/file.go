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
// the BLKGETSIZE64 ioctl on Linux, from seeking to the end elsewhere).
//
// Opened for writing, the file is claimed first (see claimForWriting): a
// file another writer has open for writing is refused with a *BusyError
// matching ErrLocked, and on Linux one whose filesystem the kernel has
// mounted (directly or through a loop device) with one matching
// ErrMounted. A block device opened for writing is also opened
// exclusively (O_EXCL), which Linux refuses while the device is mounted
// or otherwise claimed. Read-only opens take no lock and are refused
// nothing: readers may read while a writer works.
func OpenFile(path string, readOnly bool) (*File, error) {
	if readOnly {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		return sized(f, path, true)
	}
	return openWriter(path, os.O_RDWR, -1)
}

// OpenFileGrow is OpenFile for writing that first extends a regular file
// shorter than size to size bytes (the new bytes are a hole), after the
// file is claimed, so that a file another writer has open is left as it
// is.
func OpenFileGrow(path string, size int64) (*File, error) {
	return openWriter(path, os.O_RDWR, size)
}

// CreateFile creates (or truncates) a sparse image file of the given size
// and opens it read-write. An existing file is emptied only once it is
// claimed (see OpenFile): a file another writer has open, or one the
// kernel has mounted, is refused and left as it is.
func CreateFile(path string, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("create %s: negative size %d", path, size)
	}
	f, err := openClaimed(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, size: size}, nil
}

// openWriter opens path read-write and claims it; a regular file shorter
// than grow (when grow >= 0) is then extended to grow bytes.
func openWriter(path string, flag int, grow int64) (*File, error) {
	f, err := openClaimed(path, flag, 0)
	if err != nil {
		return nil, err
	}
	if grow >= 0 {
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if st.Mode().IsRegular() && st.Size() < grow {
			if err := f.Truncate(grow); err != nil {
				f.Close()
				return nil, fmt.Errorf("extend %s to %d bytes: %w", path, grow, err)
			}
		}
	}
	return sized(f, path, false)
}

// openClaimed opens path for writing (exclusively, for a block device) and
// claims it with claimForWriting.
func openClaimed(path string, flag int, perm os.FileMode) (*os.File, error) {
	block := false
	if st, err := os.Stat(path); err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
		block = true
		flag = flag&^os.O_CREATE | os.O_EXCL // O_EXCL means "in use" for a device, and with O_CREATE "exists"
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		if block {
			return nil, busyBlockDevice(path, err)
		}
		return nil, err
	}
	if err := claimForWriting(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sized wraps an open file into a File of the file's or device's size.
func sized(f *os.File, path string, readOnly bool) (*File, error) {
	size, err := deviceSize(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}
	return &File{f: f, size: size, readOnly: readOnly}, nil
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

// WriteShared implements SharedWriter: the bytes are cloned from src
// (cloneRange) where the host allows it, else written.
func (d *File) WriteShared(p []byte, off int64, src HostRange) (bool, error) {
	if d.readOnly {
		return false, ErrReadOnly
	}
	if err := checkWrite(len(p), off, d.size); err != nil {
		return false, err
	}
	if len(p) > 0 && src.File != nil && src.Off >= 0 && cloneRange(d.f, off, src.File, src.Off, int64(len(p))) == nil {
		return true, nil
	}
	_, err := d.WriteAt(p, off)
	return false, err
}
