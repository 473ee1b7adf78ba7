//go:build linux

package fuse

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/gobtrfs/btrfs"
)

var (
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.FileReaddirenter   = (*dirHandle)(nil)
	_ fs.FileLookuper       = (*dirHandle)(nil)
	_ fs.FileSeekdirer      = (*dirHandle)(nil)
)

// dirHandle is an open directory. It lists the directory in the kernel's
// order (DIR_INDEX, creation order), "." and ".." first as the kernel's
// btrfs does (dir_emit_dots; FUSE shows what the filesystem lists).
//
// The names are read at the first read; each entry's inode is looked up
// when the kernel reads that entry, by name, as a LOOKUP would, so the
// entry shows the inode the name holds at that moment (a name gone since
// is left out). With READDIRPLUS go-fuse then asks for that same name's
// attributes (FileLookuper): they are the ones just looked up, in the same
// request, instead of a second lookup of the name (rm -rf and ls -l read
// every directory this way).
//
// go-fuse serializes the calls on one handle.
type dirHandle struct {
	n     *node
	names []dirName // nil until the first read
	read  bool
	// next is the index in names of the next entry to read; offsets in
	// the directory are next after each entry (dirArray's numbering).
	next int
	// last is the entry Readdirent produced last, for Lookup.
	last struct {
		name string
		st   *btrfs.Stat
	}
}

// dirName is one name of a listing; dots are "." and "..", whose inode
// numbers are known without a lookup.
type dirName struct {
	name string
	ino  uint64 // for "." and ".." only
}

// OpendirHandle opens directory n for reading.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{n: n}, 0, 0
}

// list reads the directory's names.
func (h *dirHandle) list() syscall.Errno {
	n := h.n
	f, err := n.openFile()
	if err != nil {
		return toErrno(err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return toErrno(err)
	}
	self := n.StableAttr().Ino
	up := self
	if _, p := n.Parent(); p != nil {
		up = p.StableAttr().Ino
	}
	names := make([]dirName, 0, len(ents)+2)
	names = append(names, dirName{name: ".", ino: self}, dirName{name: "..", ino: up})
	for _, e := range ents {
		if !n.m.hidden(n, e.Name()) {
			names = append(names, dirName{name: e.Name()})
		}
	}
	h.names, h.read = names, true
	return 0
}

// Readdirent returns the next entry, nil at the end. Gathered writes go in
// first: READDIRPLUS hands the kernel each entry's attributes as found
// here.
func (h *dirHandle) Readdirent(ctx context.Context) (*gofuse.DirEntry, syscall.Errno) {
	h.n.m.putAllGathered()
	if !h.read {
		if errno := h.list(); errno != 0 {
			return nil, errno
		}
	}
	h.last.name, h.last.st = "", nil
	for h.next < len(h.names) {
		d := h.names[h.next]
		h.next++
		if d.name == "." || d.name == ".." {
			return &gofuse.DirEntry{Name: d.name, Mode: syscall.S_IFDIR, Ino: d.ino, Off: uint64(h.next)}, 0
		}
		st, errno := h.n.lookupChild(d.name)
		if errno == syscall.ENOENT {
			// Removed since the names were read: as if read before.
			continue
		}
		if errno != 0 {
			return nil, errno
		}
		h.last.name, h.last.st = d.name, st
		return &gofuse.DirEntry{Name: d.name, Mode: st.Mode, Ino: h.n.m.inos.ino(st.Subvolume, st.Ino), Off: uint64(h.next)}, 0
	}
	return nil, 0
}

// Lookup is READDIRPLUS's lookup of the entry Readdirent produced last:
// its inode as found there.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name != h.last.name || h.last.st == nil {
		return h.n.Lookup(ctx, name, out)
	}
	st := h.last.st
	h.last.name, h.last.st = "", nil
	h.n.m.fillAttr(st, &out.Attr)
	return h.n.newChild(ctx, st), 0
}

// Seekdir moves to offset off (telldir/seekdir, rewinddir); a rewind
// reads the names again, as a new opendir would.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		h.read, h.names = false, nil
	}
	if h.read && off > uint64(len(h.names)) {
		return syscall.EINVAL
	}
	h.next = int(off)
	h.last.name, h.last.st = "", nil
	return 0
}
