//go:build linux

package btrfstest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// inodeKey identifies an inode on the scanned mount. The device is part of
// it because every btrfs subvolume has its own st_dev and its own inode
// numbers (each subvolume root is inode 256).
type inodeKey struct {
	dev, ino uint64
}

// scanner holds the state of one Scan.
type scanner struct {
	tree   *Tree
	inodes map[inodeKey][]string // non-directories, for hardlink groups
	buf    []byte                // reused by file hashing
}

// Scan walks root (a kernel mount or any directory, e.g. one our reader
// extracted) without following symlinks and records every path: type,
// permission bits, owner, size, mtime, contents digest, data/hole map,
// symlink target, device numbers, xattrs, and which paths are hardlinks of
// one inode. A btrfs subvolume (a different st_dev) is recorded as the plain
// directory it appears as. Reading file contents does not change atimes
// (O_NOATIME where permitted).
func Scan(root string) (*Tree, error) {
	s := &scanner{
		tree:   &Tree{Entries: map[string]*Entry{}},
		inodes: map[inodeKey][]string{},
		buf:    make([]byte, 1<<20),
	}
	if err := s.visit(".", root); err != nil {
		return nil, err
	}
	for _, paths := range s.inodes {
		if len(paths) > 1 {
			s.tree.Links = append(s.tree.Links, paths)
		}
	}
	s.tree.sortLinks()
	return s.tree, nil
}

// visit records one path and, for a directory, everything under it.
func (s *scanner) visit(rel, abs string) error {
	var st unix.Stat_t
	if err := unix.Lstat(abs, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: abs, Err: err}
	}
	e := &Entry{
		Path:    rel,
		Ino:     st.Ino,
		Perm:    st.Mode & 0o7777,
		UID:     st.Uid,
		GID:     st.Gid,
		Nlink:   uint32(st.Nlink),
		Size:    st.Size,
		MtimeNs: st.Mtim.Nano(),
	}
	var err error
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = TypeRegular
		err = s.readFile(abs, e)
	case unix.S_IFDIR:
		e.Type = TypeDir
		e.Placeholder = rel != "." && isPlaceholder(abs, &st)
	case unix.S_IFLNK:
		e.Type = TypeSymlink
		e.Target, err = os.Readlink(abs)
	case unix.S_IFIFO:
		e.Type = TypeFifo
	case unix.S_IFSOCK:
		e.Type = TypeSocket
	case unix.S_IFCHR, unix.S_IFBLK:
		e.Type = TypeCharDev
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			e.Type = TypeBlockDev
		}
		e.RdevMajor, e.RdevMinor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
	default:
		return fmt.Errorf("%s: unknown file type %#o", abs, st.Mode&unix.S_IFMT)
	}
	if err != nil {
		return err
	}
	if e.Xattrs, err = readXattrs(abs); err != nil {
		return err
	}
	s.tree.Entries[rel] = e
	if e.Type != TypeDir {
		k := inodeKey{st.Dev, st.Ino}
		s.inodes[k] = append(s.inodes[k], rel)
		return nil
	}
	return s.visitDir(rel, abs)
}

// Facts identifying the btrfs empty-subvolume placeholder directory.
const (
	btrfsSuperMagic        = 0x9123683e
	emptySubvolDirObjectID = 2
)

// isPlaceholder reports whether a directory is the placeholder btrfs shows
// for a nested subvolume inside a snapshot. Inode 2 is the placeholder's
// fixed number on btrfs (btrfs never gives a real inode that number); on
// other filesystems inode 2 may be a real root, hence the statfs check.
func isPlaceholder(abs string, st *unix.Stat_t) bool {
	if st.Ino != emptySubvolDirObjectID {
		return false
	}
	var fs unix.Statfs_t
	return unix.Statfs(abs, &fs) == nil && fs.Type == btrfsSuperMagic
}

// visitDir visits the entries of a directory in name order.
func (s *scanner) visitDir(rel, abs string) error {
	f, err := os.Open(abs)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("readdir %s: %w", abs, err)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := s.visit(joinRel(rel, n), abs+"/"+n); err != nil {
			return err
		}
	}
	return nil
}

// readFile hashes a regular file and maps its data ranges.
func (s *scanner) readFile(abs string, e *Entry) error {
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) {
		fd, err = unix.Open(abs, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: abs, Err: err}
	}
	f := os.NewFile(uintptr(fd), abs)
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, s.buf); err != nil {
		return err
	}
	e.SHA256 = hex.EncodeToString(h.Sum(nil))
	e.Data, err = dataRanges(fd, e.Size)
	if err != nil {
		return &os.PathError{Op: "lseek", Path: abs, Err: err}
	}
	return nil
}

// dataRanges maps a file's data with SEEK_DATA/SEEK_HOLE. The end of file is
// an implicit hole, so every range ends at or before size.
func dataRanges(fd int, size int64) ([]Range, error) {
	var out []Range
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			return nil, err
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		if end <= start {
			return nil, fmt.Errorf("SEEK_HOLE from %d returned %d", start, end)
		}
		out = append(out, Range{Off: start, Len: end - start})
		off = end
	}
	return out, nil
}

// readXattrs returns all extended attributes of path (not following a
// symlink), or nil if it has none or the filesystem has no xattrs.
func readXattrs(path string) (map[string]string, error) {
	list, err := xattrCall(func(b []byte) (int, error) { return unix.Llistxattr(path, b) })
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, &os.PathError{Op: "llistxattr", Path: path, Err: err}
	}
	var out map[string]string
	for len(list) > 0 {
		i := 0
		for i < len(list) && list[i] != 0 {
			i++
		}
		name := string(list[:i])
		list = list[min(i+1, len(list)):]
		if name == "" {
			continue
		}
		v, err := xattrCall(func(b []byte) (int, error) { return unix.Lgetxattr(path, name, b) })
		if errors.Is(err, unix.ENODATA) {
			continue // removed while we looked
		}
		if err != nil {
			return nil, &os.PathError{Op: "lgetxattr " + name, Path: path, Err: err}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = string(v)
	}
	return out, nil
}

// xattrCall runs a size-probing xattr syscall: first with a small buffer,
// then, on ERANGE, with the size the kernel reports (retrying if the value
// grew in between).
func xattrCall(call func([]byte) (int, error)) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := call(buf)
		if err == nil {
			return buf[:n], nil
		}
		if !errors.Is(err, unix.ERANGE) {
			return nil, err
		}
		need, err := call(nil)
		if err != nil {
			return nil, err
		}
		buf = make([]byte, need+1)
	}
}
