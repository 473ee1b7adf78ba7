package blockdev

import (
	"errors"
	"fmt"
	"io"
)

// Device is a fixed-size, byte-addressed store: an image file, a block
// device, memory, or a wrapper around one of them.
//
// Contract, shared by every implementation in this package and required of
// any other:
//   - ReadAt fills p from offset off. If the device ends before p is full it
//     returns the number of bytes read and io.EOF (or io.ErrUnexpectedEOF);
//     reading at or past Size returns 0, io.EOF. Layers above turn such a
//     short read of a structure into a corruption error (a truncated image).
//   - WriteAt writes all of p at off or returns an error; writing past Size
//     fails with ErrOutOfRange and writes nothing. A successful WriteAt is
//     visible to later reads at once but durable only after Sync.
//   - Size is the device size in bytes and does not change while open.
//   - Sync makes every completed write durable (fsync / cache flush).
//   - Close releases the device; no method may be called afterwards.
//   - All methods are safe for concurrent use; concurrent reads and writes of
//     the same bytes see either the old or the new contents.
type Device interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Size() int64
	Sync() error
	Close() error
}

// Errors shared by the devices of this package.
var (
	// ErrOutOfRange is returned for a write that does not fit in the device
	// or an access at a negative offset.
	ErrOutOfRange = errors.New("blockdev: access out of device range")
	// ErrReadOnly is returned by WriteAt on a device opened read-only.
	ErrReadOnly = errors.New("blockdev: device is read-only")
	// ErrClosed is returned by any method called after Close.
	ErrClosed = errors.New("blockdev: device is closed")
)

// checkRead validates a read of n bytes at off against a device of the given
// size. It returns how many bytes may be read and the error to report when
// that is fewer than n.
func checkRead(n int, off, size int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at offset %d: %w", off, ErrOutOfRange)
	}
	if off >= size {
		if n == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	if int64(n) > size-off {
		return int(size - off), io.EOF
	}
	return n, nil
}

// checkWrite validates a write of n bytes at off against a device of the
// given size.
func checkWrite(n int, off, size int64) error {
	if off < 0 || off > size || int64(n) > size-off {
		return fmt.Errorf("write of %d bytes at offset %d on a %d-byte device: %w", n, off, size, ErrOutOfRange)
	}
	return nil
}
