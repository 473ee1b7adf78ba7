package btrfstest

import (
	"path"
	"sort"
	"strings"
)

// FileType is the kind of a directory entry, as lstat reports it.
type FileType uint8

// File types. The zero value is invalid so that an unset Entry is caught.
const (
	TypeRegular FileType = iota + 1
	TypeDir
	TypeSymlink
	TypeFifo
	TypeSocket
	TypeCharDev
	TypeBlockDev
)

var typeNames = [...]string{
	TypeRegular:  "file",
	TypeDir:      "dir",
	TypeSymlink:  "symlink",
	TypeFifo:     "fifo",
	TypeSocket:   "socket",
	TypeCharDev:  "chr",
	TypeBlockDev: "blk",
}

// String returns the manifest spelling of the type ("file", "dir", ...).
func (t FileType) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "invalid"
}

// parseFileType is the inverse of String.
func parseFileType(s string) (FileType, bool) {
	for i, n := range typeNames {
		if n != "" && n == s {
			return FileType(i), true
		}
	}
	return 0, false
}

// Range is one data range of a file as SEEK_DATA/SEEK_HOLE report it:
// Len bytes starting at Off hold data; the gaps between ranges are holes.
type Range struct {
	Off, Len int64
}

// Entry is what Scan recorded for one path. Which fields are meaningful
// depends on Type; the others are zero.
type Entry struct {
	// Path is relative to the scanned root, slash-separated, "." for the root.
	Path string
	Type FileType
	// Ino is the inode number. It is recorded for reader tests that want to
	// check it, but Diff never compares it.
	Ino uint64
	// Perm is the permission bits including setuid, setgid and sticky (07777).
	Perm     uint32
	UID, GID uint32
	// Nlink is the link count (btrfs directories always report 1).
	Nlink uint32
	// Size is st_size (for directories it is filesystem-specific).
	Size int64
	// MtimeNs is the modification time in nanoseconds since the Unix epoch.
	MtimeNs int64
	// SHA256 is the lowercase hex digest of a regular file's contents.
	SHA256 string
	// Data lists a regular file's data ranges (nil: all hole or empty).
	Data []Range
	// Target is a symlink's target.
	Target string
	// RdevMajor and RdevMinor are a device node's numbers.
	RdevMajor, RdevMinor uint32
	// Placeholder marks the directory btrfs shows in a snapshot where the
	// snapshotted subvolume had a nested subvolume (snapshots do not recurse;
	// the kernel synthesizes an empty directory, inode 2). Its timestamps are
	// the time the kernel first looked it up, not stored anywhere, so Diff
	// ignores its mtime.
	Placeholder bool
	// Xattrs maps every extended attribute name (all namespaces) to its raw
	// value; nil when there are none.
	Xattrs map[string]string
}

// Tree is the recorded state of a directory tree: one Entry per path plus
// the hardlink groups. Scan and Parse produce it; Diff compares two.
type Tree struct {
	// Entries maps Entry.Path to its Entry.
	Entries map[string]*Entry
	// Links are the hardlink groups: paths of non-directories sharing an
	// inode, each group sorted and with at least two paths, groups sorted by
	// their first path.
	Links [][]string
}

// Paths returns all paths of the tree in byte order (so a directory comes
// before its contents).
func (t *Tree) Paths() []string {
	ps := make([]string, 0, len(t.Entries))
	for p := range t.Entries {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// Sub returns the subtree under dir (a path in t), re-rooted so that dir
// becomes ".". It is how a scan of a whole filesystem is compared with a scan
// of one subvolume mounted on its own. Hardlink groups are restricted to the
// subtree. It returns nil if dir is not a directory of t.
func (t *Tree) Sub(dir string) *Tree {
	if e := t.Entries[dir]; e == nil || e.Type != TypeDir {
		return nil
	}
	out := &Tree{Entries: map[string]*Entry{}}
	for p, e := range t.Entries {
		rel, ok := relTo(dir, p)
		if !ok {
			continue
		}
		c := *e
		c.Path = rel
		out.Entries[rel] = &c
	}
	for _, g := range t.Links {
		var ng []string
		for _, p := range g {
			if rel, ok := relTo(dir, p); ok {
				ng = append(ng, rel)
			}
		}
		if len(ng) > 1 {
			out.Links = append(out.Links, ng)
		}
	}
	out.sortLinks()
	return out
}

// relTo returns p relative to dir, and whether p is dir or under it.
func relTo(dir, p string) (string, bool) {
	switch {
	case dir == ".":
		return p, true
	case p == dir:
		return ".", true
	case strings.HasPrefix(p, dir+"/"):
		return p[len(dir)+1:], true
	}
	return "", false
}

// sortLinks puts every group and the list of groups in canonical order.
func (t *Tree) sortLinks() {
	for _, g := range t.Links {
		sort.Strings(g)
	}
	sort.Slice(t.Links, func(i, j int) bool { return t.Links[i][0] < t.Links[j][0] })
}

// joinRel joins a relative directory path and a name, treating "." as root.
func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// validRel reports whether p is "." or a clean relative slash path, the only
// paths a Tree may hold.
func validRel(p string) bool {
	if p == "." {
		return true
	}
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || path.Clean(p) != p {
		return false
	}
	return p != ".." && !strings.HasPrefix(p, "../")
}
