package mkfs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
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
//
// What the host cannot tell is left out rather than invented: extended
// attributes are read on Linux only (other hosts name and encode them
// differently, and btrfs takes Linux's namespaces), so entries from other
// hosts have none; O_NOATIME exists only on Linux. On Windows, which has
// no POSIX owners or modes, every entry is owned by uid and gid 0,
// directories get mode 0755 and files 0644 (0444 when read-only), there
// are no device nodes, fifos or sockets, and a file's data is one segment
// (holes are not detected); BuildOptions.Chmod adjusts the modes.
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
	f, err := openHostDir(s.host(rel))
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

// hostInfo is what entry needs of lstat, in host-independent form; the
// per-OS statHost fills it in.
type hostInfo struct {
	kind         Kind   // KindFile, KindDir, KindSymlink, KindFifo, KindSocket, KindCharDev, KindBlockDev; 0 if none
	typ          uint32 // the host's file type bits, for the error about an unknown one
	perm         uint32
	uid, gid     uint32
	atime, mtime time.Time
	major, minor uint32 // of a device node
	nlink        uint64
	id           devIno // the identity hardlinks share; valid when nlink > 1
}

// entry lstats rel and fills in everything but the data reader of a file.
func (s *DirSource) entry(rel string) (*Entry, error) {
	hp := s.host(rel)
	// The root may be a symlink to the directory, so it is followed.
	st, err := statHost(hp, rel == ".")
	if err != nil {
		return nil, err
	}
	if st.kind == 0 {
		return nil, inputErr(rel, "unknown file type %#o", st.typ)
	}
	e := &Entry{Path: rel, Kind: st.kind, Perm: st.perm, UID: st.uid, GID: st.gid,
		Atime: st.atime, Mtime: st.mtime}
	switch e.Kind {
	case KindSymlink:
		if e.Target, err = os.Readlink(hp); err != nil {
			return nil, err
		}
	case KindCharDev, KindBlockDev:
		e.DevMajor, e.DevMinor = st.major, st.minor
	}
	if e.Kind != KindDir && st.nlink > 1 {
		if first, ok := s.links[st.id]; ok {
			return &Entry{Path: rel, Kind: KindHardlink, LinkOf: first}, nil
		}
		s.links[st.id] = rel
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
	f, err := openHostFile(hp)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	e.Size = st.Size()
	if e.Size == 0 {
		// Files of /proc and /sys stat as empty but have contents, which
		// cp(1) copies by reading to the end: do the same.
		data, err := readSizeless(f)
		if err != nil {
			f.Close()
			return fmt.Errorf("mkfs: %s: %w", hp, err)
		}
		if len(data) > 0 {
			s.open = f
			e.Size, e.Segments = int64(len(data)), []Segment{{Off: 0, Len: int64(len(data))}}
			e.Open = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
			return nil
		}
	}
	if e.Segments, err = dataSegments(f, e.Size); err != nil {
		f.Close()
		return fmt.Errorf("mkfs: %s: %w", hp, err)
	}
	s.open, e.host = f, f
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

// maxSizeless bounds what readSizeless keeps in memory: pseudo files are
// small, and a device pretending to be a file must not eat the memory.
const maxSizeless = 64 << 20

// readSizeless reads a file that stats as empty to its end.
func readSizeless(f io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxSizeless+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSizeless {
		return nil, fmt.Errorf("file stats as empty but holds more than %d bytes", maxSizeless)
	}
	return data, nil
}
