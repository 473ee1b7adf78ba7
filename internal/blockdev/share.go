package blockdev

import "os"

// HostRange is a range of a host file that holds the same bytes as a
// write: File's bytes from Off onwards. A device on the same host
// filesystem can take the write by sharing File's blocks (a reflink,
// FICLONERANGE on Linux) instead of writing the bytes.
type HostRange struct {
	File *os.File
	Off  int64
}

// SharedWriter is a Device that can store bytes by sharing them with a
// host file. WriteShared stores p at off exactly as WriteAt does, where
// p are also the bytes of src from src.Off: the device may share the
// host's blocks instead of writing them, and reports whether it did.
// Where sharing is not possible for this range (another filesystem, a
// host that does not clone, offsets not on the host's block boundaries,
// a device that is not a regular file) it writes p; an error is that of
// the write.
type SharedWriter interface {
	WriteShared(p []byte, off int64, src HostRange) (shared bool, err error)
}

// WriteShared stores p at off of d, shared with src where d can share
// (SharedWriter) and written otherwise; it reports whether the bytes
// were shared.
func WriteShared(d Device, p []byte, off int64, src HostRange) (bool, error) {
	if s, ok := d.(SharedWriter); ok && src.File != nil {
		return s.WriteShared(p, off, src)
	}
	_, err := d.WriteAt(p, off) // all of p or an error (the Device contract)
	return false, err
}
