//go:build linux

package fuse

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/gobtrfs/btrfs"
)

// node is one inode as go-fuse knows it. It keeps no copy of the inode:
// every request finds it again, by its numbers where the btrfs API allows
// (getattr, lookup in it, open) and by path for changes; go-fuse's tree of
// nodes gives the path (it follows renames). An open file's handle holds a
// btrfs.File, which finds its inode by number, as a file descriptor does.
type node struct {
	fs.Inode
	m *mount // immutable
	// sv and ino are the inode's numbers in the filesystem (Stat's
	// Subvolume and Ino): getattr and lookup find it by them, a tree
	// search or two instead of a walk of the whole path. Immutable.
	sv, ino uint64

	mu sync.Mutex
	// handles are the node's open files, for fstat of a file whose
	// last name went. Protected by mu.
	handles map[*handle]struct{}
	// last is the inode as last seen, what fstat reports (with no
	// links) once no name and no handle can reach it. Protected by mu.
	last *btrfs.Stat
	// orphan is the path in the orphan directory that keeps the inode
	// alive while open after its last name went; "" when it has a
	// name. Protected by mu.
	orphan string
	// noCaps records that the inode has no security.capability
	// attribute, the one the kernel asks for before every write (to
	// drop file capabilities, file_remove_privs). Asking btrfs each
	// time would cost a path walk per write(2); the mount is the only
	// writer, so the answer stays true until Setxattr of that name,
	// here, on this node (hard links share it). Protected by mu.
	noCaps bool

	// g holds the inode's gathered writes (gather_linux.go).
	g gather
}

// capsAttr is the attribute whose absence node.noCaps caches.
const capsAttr = "security.capability"

var (
	_ fs.NodeLookuper    = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeReadlinker  = (*node)(nil)
	_ fs.NodeGetxattrer  = (*node)(nil)
	_ fs.NodeListxattrer = (*node)(nil)
	_ fs.NodeStatfser    = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
)

// path is the node's path in the btrfs.FS: where go-fuse's tree puts it,
// or, for a file whose last name went while open (or an O_TMPFILE file),
// its name in the orphan directory.
func (n *node) path() string {
	if n != n.m.root {
		if _, parent := n.Parent(); parent == nil {
			n.mu.Lock()
			o := n.orphan
			n.mu.Unlock()
			if o != "" {
				return o
			}
		}
	}
	return n.m.path(n.Path(n.m.root.EmbeddedInode()))
}

// child is the btrfs path of name in directory n.
func (n *node) child(name string) string {
	p := n.path()
	if p == "." {
		return name
	}
	return p + "/" + name
}

// stat describes the node. An inode without names (removed while the
// kernel still holds it: an open file or directory) is shown as last
// seen, with no links, as fstat on the kernel's btrfs shows it.
func (n *node) stat() (*btrfs.Stat, syscall.Errno) {
	_ = n.putGathered() // the size and times with every write in
	var (
		st    *btrfs.Stat
		errno syscall.Errno
	)
	if n.byNumber() {
		st, errno = statOf(n.m.fsys.StatInode(n.sv, n.ino))
	} else {
		st, errno = n.m.lstat(n.path())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case errno == 0:
		n.last = st
		return n.unorphaned(st), 0
	case errno == syscall.ENOENT && n.last != nil:
		s := *n.last
		s.Nlink = 0
		return &s, 0
	}
	return nil, errno
}

// unorphaned is st without the orphan directory's name in its link count.
//
// Preconditions: n.mu is held.
func (n *node) unorphaned(st *btrfs.Stat) *btrfs.Stat {
	if n.orphan == "" || st.Nlink == 0 {
		return st
	}
	c := *st
	c.Nlink--
	return &c
}

// emptySubvolDirIno is the number btrfs gives the empty directory it
// shows where a snapshot's source had a nested subvolume: it has no inode
// item, so only its path finds it.
const emptySubvolDirIno = 2

// byNumber reports whether the node's inode can be found by number.
func (n *node) byNumber() bool { return n.ino != 0 && n.ino != emptySubvolDirIno }

// lookupChild describes name in directory n.
func (n *node) lookupChild(name string) (*btrfs.Stat, syscall.Errno) {
	if n.byNumber() {
		return statOf(n.m.fsys.LookupInode(n.sv, n.ino, name))
	}
	return n.m.lstat(n.child(name))
}

// openFile opens the node's inode: by number where it can.
func (n *node) openFile() (*btrfs.File, error) {
	if n.byNumber() {
		return n.m.fsys.OpenInode(n.sv, n.ino)
	}
	return n.m.fsys.OpenFile(n.path())
}

// newChild returns the node of the inode st describes, making it if
// go-fuse does not know it yet (a hard link's other name finds the same).
func (n *node) newChild(ctx context.Context, st *btrfs.Stat) *fs.Inode {
	ch := &node{m: n.m, last: st, sv: st.Subvolume, ino: st.Ino}
	return n.NewInode(ctx, ch, n.m.stable(st))
}

// Lookup finds name in directory n.
func (n *node) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.m.hidden(n, name) {
		return nil, syscall.ENOENT
	}
	if n == n.m.root && name == controlDirName && n.m.opts.Stats {
		return n.control(ctx, out), 0
	}
	n.m.putAllGathered() // the entry's attributes with every write in
	st, errno := n.lookupChild(name)
	if errno != 0 {
		return nil, errno
	}
	n.m.fillAttr(st, &out.Attr)
	return n.newChild(ctx, st), 0
}

// Getattr is stat(2).
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		if st, errno := h.stat(); errno == 0 {
			n.m.fillAttr(st, &out.Attr)
			return 0
		}
	}
	st, errno := n.stat()
	if errno != 0 {
		return errno
	}
	n.m.fillAttr(st, &out.Attr)
	return 0
}

// Readlink returns a symlink's target.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	t, err := n.m.fsys.ReadLink(n.path())
	if err != nil {
		return nil, toErrno(err)
	}
	return []byte(t), 0
}

// Getxattr copies one attribute into dest, or says how big it is.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr == capsAttr {
		n.mu.Lock()
		none := n.noCaps
		n.mu.Unlock()
		if none {
			return 0, syscall.ENODATA
		}
	}
	v, err := n.m.fsys.Getxattr(n.path(), attr)
	if err != nil {
		errno := toErrno(err)
		if attr == capsAttr && errno == syscall.ENODATA {
			n.mu.Lock()
			n.noCaps = true
			n.mu.Unlock()
		}
		return 0, errno
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Listxattr lists the attribute names, each ending in a NUL.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	xs, err := n.m.fsys.Xattrs(n.path())
	if err != nil {
		return 0, toErrno(err)
	}
	var buf []byte
	for _, x := range xs {
		buf = append(buf, x.Name...)
		buf = append(buf, 0)
	}
	if len(dest) < len(buf) {
		return uint32(len(buf)), syscall.ERANGE
	}
	return uint32(copy(dest, buf)), 0
}

// Statfs reports the filesystem's size and free space. Free space is the
// superblock's total less its bytes used, as `df` on the kernel's mount
// shows it for a single-profile filesystem; btrfs has no inode limit, so
// the inode counts are 0, as the kernel reports them.
func (n *node) Statfs(ctx context.Context, out *gofuse.StatfsOut) syscall.Errno {
	n.m.putAllGathered() // the free space with every write in
	total, used, err := n.m.space()
	if err != nil {
		return toErrno(err)
	}
	bs := uint64(n.m.bsize)
	out.Bsize = n.m.bsize
	out.Frsize = n.m.bsize
	out.NameLen = 255
	out.Blocks = total / bs
	free := uint64(0)
	if total > used {
		free = (total - used) / bs
	}
	out.Bfree = free
	out.Bavail = free
	return 0
}

// space returns the filesystem's total and used bytes.
func (m *mount) space() (total, used uint64, err error) {
	info, err := m.fsys.Info()
	if err != nil {
		return 0, 0, err
	}
	return info.TotalBytes, info.BytesUsed, nil
}
