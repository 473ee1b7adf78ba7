package blockdev

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrLocked is matched (errors.Is) when a device cannot be opened for
// writing because another writer has it open for writing: a second writer
// would overwrite what the first one commits, and neither would notice.
var ErrLocked = errors.New("image is open for writing elsewhere")

// ErrMounted is matched when a device cannot be opened for writing because
// the kernel has the filesystem on it mounted: the kernel caches the
// filesystem and would neither see our changes nor keep them (its next
// commit writes over them).
var ErrMounted = errors.New("mounted by the kernel")

// BusyError says why a device was refused for writing and, as far as the
// system tells, who holds it. It matches ErrLocked or ErrMounted (Kind) and
// the system's own error (Cause), when there was one.
type BusyError struct {
	// Path is the device or image file as it was given.
	Path string
	// Kind is ErrLocked or ErrMounted.
	Kind error
	// MountPoint is where the kernel has the filesystem mounted; "" when
	// it is not mounted or the mount is not visible from this process
	// (another mount namespace).
	MountPoint string
	// Through is the block device the kernel mounted: the loop device
	// attached to an image file, or a device of the filesystem other
	// than Path. "" when that is Path itself.
	Through string
	// Cause is the system's error behind the refusal (EBUSY from an
	// exclusive open of a block device), or nil.
	Cause error
}

// Error names the path, the reason and what to do about it.
func (e *BusyError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	b.WriteString(": ")
	switch e.Kind {
	case ErrMounted:
		b.WriteString("mounted by the kernel")
		switch {
		case e.MountPoint != "" && e.Through != "":
			fmt.Fprintf(&b, " at %s (through %s)", e.MountPoint, e.Through)
		case e.MountPoint != "":
			fmt.Fprintf(&b, " at %s", e.MountPoint)
		case e.Through != "":
			fmt.Fprintf(&b, " (through %s; the mount point is not visible from here)", e.Through)
		}
		b.WriteString("; unmount it first")
	default:
		b.WriteString(ErrLocked.Error())
		if e.Cause != nil {
			fmt.Fprintf(&b, " (the device is opened exclusively by another writer, in this or another process, or claimed by the kernel: %v)", e.Cause)
		} else {
			b.WriteString(" (another writer, in this or another process, holds its lock); close that writer first")
		}
	}
	return b.String()
}

// Unwrap gives errors.Is and errors.As the kind and the system's error.
func (e *BusyError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

// claimForWriting makes f, just opened read-write at path, this process's
// to write: it refuses a filesystem the kernel has mounted and takes the
// writer's lock (lock_*.go), so that a second writer, in this process or
// another, is refused until f is closed. Readers take no lock and are not
// refused. The lock is taken first, so that two writers racing past the
// mount check still cannot both win.
func claimForWriting(f *os.File, path string) error {
	held, err := lockWriter(f)
	if err != nil {
		return fmt.Errorf("lock %s for writing: %w", path, err)
	}
	if held {
		return &BusyError{Path: path, Kind: ErrLocked}
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if m := kernelMount(st); m != nil {
		m.Path = path
		return m
	}
	return nil
}
