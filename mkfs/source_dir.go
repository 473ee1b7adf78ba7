package mkfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// DirSource walks a directory of the host, in byte order of names at every
// level (so the walk, and an image built from it, do not depend on the
// order the host filesystem lists directories in). It reports what lstat
// reports: symlinks are not followed, hardlinks (same device and inode,
// not directories) after the first become KindHardlink entries, and the
// data of regular files comes as segments found with SEEK_DATA and
// SEEK_HOLE, so holes stay holes.
//
// It keeps in memory the names still to visit (the listings of the
// directories on the current path) and one (device, inode) → path entry
// per multiply-linked file. It crosses mount points, and reads files and
// directories with O_NOATIME where allowed, so that reading the input
// does not change it.
type DirSource struct {
	root  string
	stack [][]string // per level, the paths still to visit (reversed)
	links map[devIno]string
	open  *os.File // the file of the last entry, closed on the next Next
	start bool
}

type devIno struct{ dev, ino uint64 }

// OpenDir returns a DirSource for the tree at root, which must be a
// directory (symlinks to one are followed for root only).
func OpenDir(root string) (*DirSource, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("mkfs: %s is not a directory", root)
	}
	return &DirSource{root: root, links: map[devIno]string{}}, nil
}

// Next returns the next entry in walk order, io.EOF at the end.
func (s *DirSource) Next() (*Entry, error) {
	s.closeOpen()
	var rel string
	if !s.start {
		s.start = true
		rel = "."
	} else {
		for len(s.stack) > 0 && len(s.stack[len(s.stack)-1]) == 0 {
			s.stack = s.stack[:len(s.stack)-1]
		}
		if len(s.stack) == 0 {
			return nil, io.EOF
		}
		top := s.stack[len(s.stack)-1]
		rel = top[len(top)-1]
		s.stack[len(s.stack)-1] = top[:len(top)-1]
	}
	e, err := s.entry(rel)
	if err != nil {
		return nil, err
	}
	if e.Kind == KindDir {
		if err := s.push(rel); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Close releases the open file, if any.
func (s *DirSource) Close() error {
	s.closeOpen()
	s.stack = nil
	return nil
}

func (s *DirSource) closeOpen() {
	if s.open != nil {
		s.open.Close()
		s.open = nil
	}
}

func (s *DirSource) host(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }

// push lists directory rel and queues its children.
func (s *DirSource) push(rel string) error {
	f, err := openNoAtime(s.host(rel), unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("mkfs: list %s: %w", s.host(rel), err)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for i, n := range names {
		if rel != "." {
			n = rel + "/" + n
		}
		if _, err := CleanPath(n); err != nil {
			return err
		}
		names[i] = n
	}
	s.stack = append(s.stack, names)
	return nil
}

// entry lstats rel and fills in everything but the data reader of a file.
func (s *DirSource) entry(rel string) (*Entry, error) {
	hp := s.host(rel)
	var st unix.Stat_t
	stat := unix.Lstat
	if rel == "." {
		stat = unix.Stat // the root may be a symlink to the directory
	}
	if err := stat(hp, &st); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: hp, Err: err}
	}
	e := &Entry{Path: rel, Perm: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid,
		Atime: time.Unix(st.Atim.Unix()), Mtime: time.Unix(st.Mtim.Unix())}
	var err error
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.Kind = KindDir
	case unix.S_IFREG:
		e.Kind = KindFile
	case unix.S_IFLNK:
		e.Kind = KindSymlink
		if e.Target, err = os.Readlink(hp); err != nil {
			return nil, err
		}
	case unix.S_IFIFO:
		e.Kind = KindFifo
	case unix.S_IFSOCK:
		e.Kind = KindSocket
	case unix.S_IFCHR, unix.S_IFBLK:
		e.Kind = KindCharDev
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			e.Kind = KindBlockDev
		}
		e.DevMajor, e.DevMinor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
	default:
		return nil, inputErr(rel, "unknown file type %#o", st.Mode&unix.S_IFMT)
	}
	if e.Kind != KindDir && st.Nlink > 1 {
		id := devIno{st.Dev, st.Ino}
		if first, ok := s.links[id]; ok {
			return &Entry{Path: rel, Kind: KindHardlink, LinkOf: first}, nil
		}
		s.links[id] = rel
	}
	if rel == "." {
		hp += "/." // xattrs of the directory, not of a symlink to it
	}
	if e.Xattrs, err = hostXattrs(hp); err != nil {
		return nil, err
	}
	if e.Kind == KindFile {
		if err := s.fileData(e, hp); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// fileData opens a regular file and maps its data segments.
func (s *DirSource) fileData(e *Entry, hp string) error {
	f, err := openNoAtime(hp, unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	e.Size = st.Size()
	if e.Segments, err = dataSegments(f, e.Size); err != nil {
		f.Close()
		return fmt.Errorf("mkfs: %s: %w", hp, err)
	}
	s.open = f
	segs := e.Segments
	e.Open = func() (io.ReadCloser, error) {
		rs := make([]io.Reader, len(segs))
		for i, sg := range segs {
			rs[i] = io.NewSectionReader(f, sg.Off, sg.Len)
		}
		return io.NopCloser(io.MultiReader(rs...)), nil
	}
	return nil
}

// openNoAtime opens hp for reading without updating its access time
// where the caller may (owner or CAP_FOWNER), so that reading the input
// (twice, with a pre-pass) does not change what a second build sees.
func openNoAtime(hp string, flags int) (*os.File, error) {
	f, err := os.OpenFile(hp, os.O_RDONLY|flags|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) {
		f, err = os.OpenFile(hp, os.O_RDONLY|flags, 0)
	}
	return f, err
}

// dataSegments lists the data ranges of f with SEEK_DATA/SEEK_HOLE. A
// filesystem that does not know them (EINVAL) gets one segment.
func dataSegments(f *os.File, size int64) ([]Segment, error) {
	var segs []Segment
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		d, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if errors.Is(err, unix.EINVAL) && off == 0 {
			return []Segment{{0, size}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("seek data at %d: %w", off, err)
		}
		if d >= size {
			break
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("seek hole at %d: %w", d, err)
		}
		h = min(h, size)
		if h <= d {
			return nil, fmt.Errorf("seek hole at %d returned %d", d, h)
		}
		segs = append(segs, Segment{d, h - d})
		off = h
	}
	return segs, nil
}

// hostXattrs reads every extended attribute of hp (not following a
// symlink), sorted by name.
func hostXattrs(hp string) ([]Xattr, error) {
	buf := make([]byte, 4096)
	var n int
	for {
		var err error
		n, err = unix.Llistxattr(hp, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, &os.PathError{Op: "llistxattr", Path: hp, Err: err}
		}
		break
	}
	var xs []Xattr
	for _, name := range splitNul(buf[:n]) {
		v, err := lgetxattr(hp, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, &os.PathError{Op: "lgetxattr " + name, Path: hp, Err: err}
		}
		xs = append(xs, Xattr{Name: name, Value: v})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
	return xs, nil
}

func lgetxattr(hp, name string) ([]byte, error) {
	size := 256
	for {
		buf := make([]byte, size)
		n, err := unix.Lgetxattr(hp, name, buf)
		if errors.Is(err, unix.ERANGE) && size < 1<<20 {
			size *= 4
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

func splitNul(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		if i > 0 {
			out = append(out, string(b[:i]))
		}
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}
