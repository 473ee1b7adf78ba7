//go:build unix

package mkfs

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// statHost lstats hp (stats it when follow is set) with the host's
// stat(2), which every Unix lays out alike in the bits used here: the
// POSIX file type and permission bits, owners, nanosecond times and the
// device number, decoded with the host's own major/minor split.
func statHost(hp string, follow bool) (hostInfo, error) {
	var st unix.Stat_t
	stat := unix.Lstat
	if follow {
		stat = unix.Stat
	}
	if err := stat(hp, &st); err != nil {
		return hostInfo{}, &os.PathError{Op: "lstat", Path: hp, Err: err}
	}
	mode := uint32(st.Mode)
	hi := hostInfo{typ: mode & unix.S_IFMT, perm: mode & 0o7777, uid: st.Uid, gid: st.Gid,
		atime: time.Unix(st.Atim.Unix()), mtime: time.Unix(st.Mtim.Unix()),
		nlink: uint64(st.Nlink), id: devIno{uint64(st.Dev), uint64(st.Ino)}}
	switch hi.typ {
	case unix.S_IFDIR:
		hi.kind = KindDir
	case unix.S_IFREG:
		hi.kind = KindFile
	case unix.S_IFLNK:
		hi.kind = KindSymlink
	case unix.S_IFIFO:
		hi.kind = KindFifo
	case unix.S_IFSOCK:
		hi.kind = KindSocket
	case unix.S_IFCHR, unix.S_IFBLK:
		hi.kind = KindCharDev
		if hi.typ == unix.S_IFBLK {
			hi.kind = KindBlockDev
		}
		rdev := uint64(st.Rdev)
		hi.major, hi.minor = unix.Major(rdev), unix.Minor(rdev)
	}
	return hi, nil
}

// openHostDir opens the directory hp for listing.
func openHostDir(hp string) (*os.File, error) { return openNoAtime(hp, unix.O_DIRECTORY) }

// openHostFile opens the regular file hp for reading, not following a
// symlink that replaced it since the lstat.
func openHostFile(hp string) (*os.File, error) { return openNoAtime(hp, unix.O_NOFOLLOW) }

// openNoAtime opens hp for reading without updating its access time
// where the caller may (owner or CAP_FOWNER), so that reading the input
// (twice, with a pre-pass) does not change what a second build sees.
// Hosts without O_NOATIME (noAtimeFlag 0) just open.
func openNoAtime(hp string, flags int) (*os.File, error) {
	f, err := os.OpenFile(hp, os.O_RDONLY|flags|noAtimeFlag, 0)
	if noAtimeFlag != 0 && errors.Is(err, unix.EPERM) {
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
