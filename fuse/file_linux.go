//go:build linux

package fuse

import (
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/gobtrfs/btrfs"
)

// handle is an open regular file. Its btrfs.File finds the inode by
// number, so it keeps working across renames, and (through the orphan
// directory, see orphan_linux.go) after the last name goes.
type handle struct {
	n     *node       // immutable
	f     *btrfs.File // immutable
	write bool        // opened for writing; immutable
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
)

// Open opens a regular file. The kernel's page cache is kept across opens
// (FOPEN_KEEP_CACHE): this mount is the only writer of the image (the
// writer's lock keeps others out) and every change to file data comes
// through the kernel, which updates or drops its cache as it sends it.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	if write && n.m.ro {
		return nil, 0, syscall.EROFS
	}
	// O_TRUNC came before as a SETATTR of the size: the mount does not
	// take FUSE_ATOMIC_O_TRUNC.
	f, err := n.openFile()
	if err != nil {
		return nil, 0, toErrno(err)
	}
	return n.open(f, write), gofuse.FOPEN_KEEP_CACHE, 0
}

// open registers a new handle of f on n.
func (n *node) open(f *btrfs.File, write bool) *handle {
	h := &handle{n: n, f: f, write: write}
	n.mu.Lock()
	if n.handles == nil {
		n.handles = map[*handle]struct{}{}
	}
	n.handles[h] = struct{}{}
	n.mu.Unlock()
	return h
}

// stat describes the open file.
func (h *handle) stat() (*btrfs.Stat, syscall.Errno) {
	_ = h.n.putGathered() // the size and times with every write in
	fi, err := h.f.Stat()
	if err != nil {
		return nil, toErrno(err)
	}
	st, ok := fi.Sys().(*btrfs.Stat)
	if !ok {
		return nil, syscall.EIO
	}
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	h.n.last = st
	return h.n.unorphaned(st), 0
}

// Getattr is fstat(2).
func (h *handle) Getattr(ctx context.Context, out *gofuse.AttrOut) syscall.Errno {
	st, errno := h.stat()
	if errno != 0 {
		return errno
	}
	h.n.m.fillAttr(st, &out.Attr)
	return 0
}

// Read is pread(2).
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	_ = h.n.putGathered()
	n, err := h.f.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, toErrno(err)
	}
	return gofuse.ReadResultData(dest[:n]), 0
}

// Write is pwrite(2).
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.n.m.ro {
		return 0, syscall.EROFS
	}
	if errno := h.killBeforeWrite(ctx); errno != 0 {
		return 0, errno
	}
	gathered, err := h.gatherWrite(data, off)
	if err != nil {
		return 0, toErrno(err)
	}
	if gathered {
		return uint32(len(data)), 0
	}
	n, err := h.f.WriteAt(data, off)
	if err != nil {
		return uint32(n), toErrno(err)
	}
	return uint32(n), 0
}

// Fsync is fsync(2) and fdatasync(2): File.Sync, which writes the tree
// log when the running transaction holds only data writes (as the
// kernel's fsync), else commits (shared with every other caller syncing
// at the same time); the notreelog option makes it always commit.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if h.n.m.ro {
		return 0
	}
	if err := h.n.gatheredErr(); err != nil {
		return toErrno(err)
	}
	return toErrno(h.f.Sync())
}

// Flush is close(2) of one descriptor: the inode's gathered writes go into
// the filesystem (so other opens see them: close-to-open consistency), and
// a gathered write that failed is reported here if no fsync did.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if h.n.m.ro {
		return 0
	}
	return toErrno(h.n.gatheredErr())
}

// Release is the last close of the open file.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	n := h.n
	// Gathered writes that go in through h.f go in before it closes.
	// Others stay: the kernel sends RELEASE after close(2) has
	// returned, while other descriptors may be writing.
	n.putThrough(h.f)
	h.f.Close()
	n.mu.Lock()
	delete(n.handles, h)
	last := len(n.handles) == 0
	n.mu.Unlock()
	if last {
		n.dropGather()
		n.m.dropOrphan(n)
	}
	return 0
}

// Lseek finds data and holes (SEEK_DATA, SEEK_HOLE); the kernel handles
// the other whences itself.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	_ = h.n.putGathered()
	var (
		pos int64
		err error
	)
	switch whence {
	case btrfs.SeekData:
		pos, err = h.f.SeekDataAt(int64(off))
	case btrfs.SeekHole:
		pos, err = h.f.SeekHoleAt(int64(off))
	default:
		return 0, syscall.EINVAL
	}
	if err != nil {
		return 0, toErrno(err)
	}
	return uint64(pos), 0
}
