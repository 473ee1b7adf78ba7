package mkfs

import (
	"io/fs"
	"os"
	"syscall"
	"time"
)

// statHost describes hp with what Windows has: a type (directory,
// regular file or symlink), the read-only attribute, times and, for
// regular files, the link count and file ID that identify hardlinks.
// There are no POSIX owners or modes: entries are owned by 0:0, and get
// the modes a Unix user with umask 022 would create (0755 directories,
// 0644 files, less write permission for read-only ones). Anything else,
// such as a junction, is not representable and is reported by entry.
func statHost(hp string, follow bool) (hostInfo, error) {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(hp)
	if err != nil {
		return hostInfo{}, err
	}
	m := fi.Mode()
	hi := hostInfo{typ: uint32(m.Type() >> 20), perm: uint32(m.Perm()) &^ 0o022 & 0o755,
		mtime: fi.ModTime(), atime: fi.ModTime()}
	if ad, ok := fi.Sys().(*syscall.Win32FileAttributeData); ok {
		hi.atime = time.Unix(0, ad.LastAccessTime.Nanoseconds())
	}
	switch {
	case m.IsDir():
		hi.kind = KindDir
	case m.IsRegular():
		hi.kind = KindFile
		hi.perm &^= 0o111 // no execute bit to take from the host
		hi.nlink, hi.id, err = fileIdentity(hp)
		if err != nil {
			return hostInfo{}, err
		}
	case m.Type() == fs.ModeSymlink:
		hi.kind = KindSymlink
		hi.perm = 0o777
	}
	return hi, nil
}

// fileIdentity gives the link count and (volume, file index) of the file
// hp, so that hardlinks become one inode in the image.
func fileIdentity(hp string) (uint64, devIno, error) {
	f, err := os.Open(hp)
	if err != nil {
		return 0, devIno{}, err
	}
	defer f.Close()
	var d syscall.ByHandleFileInformation
	if err := syscall.GetFileInformationByHandle(syscall.Handle(f.Fd()), &d); err != nil {
		return 0, devIno{}, &os.PathError{Op: "GetFileInformationByHandle", Path: hp, Err: err}
	}
	return uint64(d.NumberOfLinks), devIno{uint64(d.VolumeSerialNumber), uint64(d.FileIndexHigh)<<32 | uint64(d.FileIndexLow)}, nil
}

// openHostDir opens the directory hp for listing.
func openHostDir(hp string) (*os.File, error) { return os.Open(hp) }

// openHostFile opens the regular file hp for reading.
func openHostFile(hp string) (*os.File, error) { return os.Open(hp) }

// dataSegments gives the whole file as one segment: Windows reports
// sparse ranges only through an ioctl this package does not use, so holes
// are read as zeros (and stored as data).
func dataSegments(_ *os.File, size int64) ([]Segment, error) {
	if size == 0 {
		return nil, nil
	}
	return []Segment{{0, size}}, nil
}

// hostXattrs reads nothing: Windows has no extended attributes that map
// to Linux's.
func hostXattrs(string) ([]Xattr, error) { return nil, nil }
