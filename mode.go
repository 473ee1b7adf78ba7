package btrfs

import (
	"io/fs"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// modeTypes pairs each Linux file type with its fs.FileMode type bits; the
// table is the single place both conversions below read, so they cannot
// drift apart.
var modeTypes = [...]struct {
	unix uint32
	fm   fs.FileMode
}{
	{disk.ModeRegular, 0},
	{disk.ModeDir, fs.ModeDir},
	{disk.ModeSymlink, fs.ModeSymlink},
	{disk.ModeFIFO, fs.ModeNamedPipe},
	{disk.ModeSocket, fs.ModeSocket},
	{disk.ModeCharDev, fs.ModeDevice | fs.ModeCharDevice},
	{disk.ModeBlockDev, fs.ModeDevice},
}

// modeSpecial pairs the set-id and sticky bits of both notations.
var modeSpecial = [...]struct {
	unix uint32
	fm   fs.FileMode
}{
	{disk.ModeSetUID, fs.ModeSetuid},
	{disk.ModeSetGID, fs.ModeSetgid},
	{disk.ModeSticky, fs.ModeSticky},
}

// UnixMode returns the Linux st_mode bits (type, set-id, sticky,
// permissions) of m. A mode without type bits is a regular file; type
// combinations Linux has no file type for (fs.ModeIrregular, or
// fs.ModeCharDevice without fs.ModeDevice) give no type bits, which no
// valid inode has, so callers can reject them. Callers that only want the
// permission part take UnixMode(m) & 0o7777.
func UnixMode(m fs.FileMode) uint32 {
	mode := uint32(m.Perm())
	for _, s := range modeSpecial {
		if m&s.fm != 0 {
			mode |= s.unix
		}
	}
	for _, t := range modeTypes {
		if m&fs.ModeType == t.fm {
			return mode | t.unix
		}
	}
	return mode
}

// FileModeOf returns the fs.FileMode of Linux st_mode bits. Bits without a
// type (a bare permission value such as 0o4755) give only the permission,
// set-id and sticky bits, so a chmod result converts directly; a type
// Linux does not define gives fs.ModeIrregular. Bits above the type are
// ignored.
func FileModeOf(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & disk.ModePerm)
	for _, s := range modeSpecial {
		if mode&s.unix != 0 {
			m |= s.fm
		}
	}
	typ := mode & disk.ModeTypeMask
	if typ == 0 {
		return m
	}
	for _, t := range modeTypes {
		if typ == t.unix {
			return m | t.fm
		}
	}
	return m | fs.ModeIrregular
}

// Mkdev encodes a device number as Mknod takes it and Stat reports it:
// Linux's user-space dev_t: the minor's low 8 bits in bits 0-7 and the
// rest in bits 20-43, the major's low 12 bits in bits 8-19 and the rest
// in bits 44-63. It is spelled out, not
// taken from the host (unix.Mkdev), whose encoding differs on other
// systems; btrfs stores this form on every system.
func Mkdev(major, minor uint32) uint64 {
	ma, mi := uint64(major), uint64(minor)
	return ma&0xfff<<8 | ma&^0xfff<<32 | mi&0xff | mi&^0xff<<12
}
