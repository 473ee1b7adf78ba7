//go:build linux

package fuse

import (
	"context"
	"encoding/json"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// The control directory (Options.Stats) is a read-only directory at the
// top of the mount that only a lookup by name finds: listings do not show
// it, so programs that walk the mount (and the comparison with the kernel's
// mount) never meet it. Its file "counters" reads as the write counters of
// the live filesystem (btrfs.FS.WriteCounters: commits, bytes written, the
// B-tree engine's counters per tree) as JSON, taken when the file is
// opened, so a benchmark can read them off a running mount. It shadows a
// real entry of the same name.
const (
	controlDirName  = ".gobtrfs"
	countersName    = "counters"
	controlDirIno   = inoSubvolFlag - 1
	countersFileIno = inoSubvolFlag - 2
)

// controlDir is the control directory.
type controlDir struct {
	fs.Inode
	m *mount
}

var (
	_ fs.NodeLookuper  = (*controlDir)(nil)
	_ fs.NodeReaddirer = (*controlDir)(nil)
	_ fs.NodeGetattrer = (*controlDir)(nil)
)

// control returns the control directory's node.
func (n *node) control(ctx context.Context, out *gofuse.EntryOut) *fs.Inode {
	d := &controlDir{m: n.m}
	d.fill(&out.Attr)
	return n.NewInode(ctx, d, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: controlDirIno})
}

func (d *controlDir) fill(a *gofuse.Attr) {
	a.Ino = controlDirIno
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 1
}

func (d *controlDir) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	d.fill(&out.Attr)
	return 0
}

func (d *controlDir) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name != countersName {
		return nil, syscall.ENOENT
	}
	c := &countersFile{m: d.m}
	c.fill(&out.Attr)
	return d.NewInode(ctx, c, fs.StableAttr{Mode: syscall.S_IFREG, Ino: countersFileIno}), 0
}

func (d *controlDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return fs.NewListDirStream([]gofuse.DirEntry{{Name: countersName, Mode: syscall.S_IFREG, Ino: countersFileIno}}), 0
}

// countersFile is the control directory's "counters".
type countersFile struct {
	fs.Inode
	m *mount
}

var (
	_ fs.NodeOpener    = (*countersFile)(nil)
	_ fs.NodeGetattrer = (*countersFile)(nil)
)

func (c *countersFile) fill(a *gofuse.Attr) {
	a.Ino = countersFileIno
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
}

func (c *countersFile) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	c.fill(&out.Attr)
	return 0
}

// Open takes the counters; the reads of this open see them. Direct I/O:
// the size is not known before, and no page cache may keep old counters.
func (c *countersFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EACCES
	}
	var data []byte
	if wc, err := c.m.fsys.WriteCounters(); err != nil {
		data, _ = json.Marshal(map[string]string{"error": err.Error()})
	} else {
		data, _ = json.MarshalIndent(wc, "", "  ")
	}
	return &snapshot{data: append(data, '\n')}, gofuse.FOPEN_DIRECT_IO, 0
}

// snapshot is an open "counters": the bytes taken at open.
type snapshot struct{ data []byte }

var _ fs.FileReader = (*snapshot)(nil)

func (s *snapshot) Read(ctx context.Context, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	if off >= int64(len(s.data)) {
		return gofuse.ReadResultData(nil), 0
	}
	return gofuse.ReadResultData(s.data[off:min(int64(len(s.data)), off+int64(len(dest)))]), 0
}
