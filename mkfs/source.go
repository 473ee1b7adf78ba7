package mkfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Kind is what an Entry creates.
type Kind uint8

// Entry kinds. The zero value is invalid so that an unset Entry is caught.
const (
	KindFile Kind = iota + 1
	KindDir
	KindSymlink
	// KindHardlink is another name for an earlier entry (Entry.LinkOf).
	KindHardlink
	KindFifo
	KindSocket
	KindCharDev
	KindBlockDev
)

var kindNames = [...]string{KindFile: "file", KindDir: "directory", KindSymlink: "symlink",
	KindHardlink: "hardlink", KindFifo: "fifo", KindSocket: "socket",
	KindCharDev: "character device", KindBlockDev: "block device"}

// String names the kind for messages.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Segment is one range of a regular file that holds data: Len bytes at
// Off. What lies between segments (and after the last, up to Size) is a
// hole, and stays one in the image.
type Segment struct {
	Off, Len int64
}

// Xattr is one extended attribute: its full name ("user.x") and raw value.
type Xattr struct {
	Name  string
	Value []byte
}

// Entry is one thing to put into the new filesystem, as a Source reports
// it. Which fields matter depends on Kind; the others are zero.
type Entry struct {
	// Path is slash-separated and relative to the root of the image, with
	// no "." or ".." components; "." is the root directory itself.
	Path string
	Kind Kind
	// Perm holds the permission, set-id and sticky bits (07777).
	Perm     uint32
	UID, GID uint32
	// Atime and Mtime keep nanoseconds.
	Atime, Mtime time.Time
	// DevMajor and DevMinor are a device node's numbers.
	DevMajor, DevMinor uint32
	// Target is a symlink's target.
	Target string
	// LinkOf is, for KindHardlink, the Path of an earlier entry that is
	// not a directory.
	LinkOf string
	// Xattrs are the extended attributes, in any order.
	Xattrs []Xattr
	// Size is a regular file's length; Segments its data ranges, in
	// increasing offset order, not overlapping, all inside [0, Size).
	Size     int64
	Segments []Segment
	// Open returns the file's data: the bytes of every segment, one after
	// the other. It is valid only until the Source's next Next call, and
	// may be called at most once. Nil when there are no segments.
	Open func() (io.ReadCloser, error)

	// prepared is the data compressed and checksummed ahead by the
	// prefetcher (one segment from offset 0), or nil.
	prepared *btrfs.PreparedData
	// host is the open host file the data come from (DirSource), for
	// BuildOptions.Reflink; valid as long as Open is.
	host *os.File
}

// DataBytes is the number of bytes in the entry's segments.
func (e *Entry) DataBytes() int64 {
	var n int64
	for _, s := range e.Segments {
		n += s.Len
	}
	return n
}

// Source yields the entries of a tree, parents before their children
// (Build creates missing parent directories itself, as for a tar stream
// that names only files). Next returns io.EOF after the last entry.
type Source interface {
	Next() (*Entry, error)
	Close() error
}

// Opener opens a Source. Build calls it twice when it makes a first pass
// (validation, progress total, reproducible seed) before writing anything.
type Opener func() (Source, error)

// ErrInput is wrapped by errors about input that cannot be represented in
// a btrfs image (names over 255 bytes, symlink targets too long, paths
// leaving the root, duplicate entries). The message names the path.
var ErrInput = errors.New("mkfs: input cannot be stored")

// inputErr returns an ErrInput error naming p.
func inputErr(p, format string, args ...any) error {
	return fmt.Errorf("%w: %q: %s", ErrInput, p, fmt.Sprintf(format, args...))
}

// CleanPath turns an archive or host path into an Entry path: slashes
// collapsed, a leading "/" or "./" dropped. Components "..", names over
// 255 bytes, empty paths and NUL bytes are errors naming the path.
func CleanPath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", inputErr(p, "NUL byte in path")
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", inputErr(p, "path leaves the root (..)")
		}
		if len(c) > disk.NameMax {
			return "", inputErr(p, "name of %d bytes, at most %d", len(c), disk.NameMax)
		}
	}
	c := path.Clean("/" + p)
	if c == "/" {
		return ".", nil
	}
	return c[1:], nil
}

// MaxSymlinkTarget is the longest symlink target an image of nodeSize can
// hold: the target is one inline extent item in a leaf, and Linux itself
// takes no target of PATH_MAX (4096) bytes or more.
func MaxSymlinkTarget(nodeSize int) int {
	return min(4095, disk.MaxItemDataSize(nodeSize)-disk.FileExtentInlineDataStart)
}

// validate checks what can be checked of one entry on its own: its path,
// kind, target and segments. nodeSize bounds symlink targets.
func (e *Entry) validate(nodeSize int) error {
	p, err := CleanPath(e.Path)
	if err != nil {
		return err
	}
	if p != e.Path {
		return inputErr(e.Path, "path not clean (want %q)", p)
	}
	if p == "." && e.Kind != KindDir {
		return inputErr(p, "the root must be a directory, not a %s", e.Kind)
	}
	switch e.Kind {
	case KindFile:
		return e.validateSegments()
	case KindSymlink:
		if e.Target == "" || strings.IndexByte(e.Target, 0) >= 0 {
			return inputErr(p, "symlink target empty or with a NUL byte")
		}
		if m := MaxSymlinkTarget(nodeSize); len(e.Target) > m {
			return inputErr(p, "symlink target of %d bytes, at most %d with node size %d", len(e.Target), m, nodeSize)
		}
	case KindHardlink:
		if _, err := CleanPath(e.LinkOf); err != nil || e.LinkOf == "" || e.LinkOf == "." {
			return inputErr(p, "hardlink to %q: not a valid path", e.LinkOf)
		}
	case KindDir, KindFifo, KindSocket, KindCharDev, KindBlockDev:
	default:
		return inputErr(p, "unknown kind %d", uint8(e.Kind))
	}
	for _, x := range e.Xattrs {
		if x.Name == "" || len(x.Name) > disk.NameMax || strings.IndexByte(x.Name, 0) >= 0 {
			return inputErr(p, "xattr name %q: empty, over %d bytes or with a NUL byte", x.Name, disk.NameMax)
		}
	}
	return nil
}

// validateSegments checks that a file's segments are ordered and inside
// its size.
func (e *Entry) validateSegments() error {
	if e.Size < 0 {
		return inputErr(e.Path, "negative size %d", e.Size)
	}
	var end int64
	for _, s := range e.Segments {
		if s.Off < end || s.Len <= 0 || s.Off > e.Size-s.Len {
			return inputErr(e.Path, "bad data segment [%d,+%d) for size %d", s.Off, s.Len, e.Size)
		}
		end = s.Off + s.Len
	}
	if len(e.Segments) > 0 && e.Open == nil {
		return inputErr(e.Path, "data segments but no data")
	}
	return nil
}

// copyExact copies exactly n bytes of r to w, naming p when r runs short.
func copyExact(w io.Writer, r io.Reader, n int64, p string) error {
	got, err := io.CopyN(w, r, n)
	if err == io.EOF {
		return fmt.Errorf("%q: data ended after %d of %d bytes (file changed while read?)", p, got, n)
	}
	if err != nil {
		return fmt.Errorf("%q: %w", p, err)
	}
	return nil
}
