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

var (
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

// made finishes a new inode at name (whose last component is base, or ""
// when it is not in n) made in directory n: the entry the kernel gets.
// Owner, group, mode and the mount's nodatacow/nodatasum were set by the
// change that made it (createOptions).
func (n *node) made(ctx context.Context, name, base string, mode uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var st *btrfs.Stat
	var errno syscall.Errno
	if base == "" {
		st, errno = n.m.lstat(name)
	} else {
		st, errno = n.lookupChild(base)
	}
	if errno != 0 {
		return nil, errno
	}
	return n.madeStat(ctx, st, out), 0
}

// madeStat is made with the new inode's Stat as the change that made it
// returned it (CreateEmptyStat, MkdirStat).
func (n *node) madeStat(ctx context.Context, st *btrfs.Stat, out *gofuse.EntryOut) *fs.Inode {
	n.m.fillAttr(st, &out.Attr)
	ch := n.newChild(ctx, st)
	if cn, ok := ch.Operations().(*node); ok {
		// A new inode has no attributes at all.
		cn.mu.Lock()
		cn.noCaps = true
		cn.mu.Unlock()
	}
	return ch
}

// Create is open(2) with O_CREAT of a new file.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.m.ro {
		return nil, nil, 0, syscall.EROFS
	}
	// One change makes the file and gives the open File: no lookup of
	// the inode after it.
	f, st, err := n.m.fsys.CreateOpen(n.child(name), btrfs.FileModeOf(mode&0o7777), n.m.createOptions(ctx, name))
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	ch := n.madeStat(ctx, st, out)
	cn := ch.Operations().(*node)
	return ch, cn.open(f, true), gofuse.FOPEN_KEEP_CACHE, 0
}

// Mkdir is mkdir(2).
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.m.ro {
		return nil, syscall.EROFS
	}
	st, err := n.m.fsys.MkdirStat(n.child(name), btrfs.FileModeOf(mode&0o7777), n.m.createOptions(ctx, name))
	if err != nil {
		return nil, toErrno(err)
	}
	return n.madeStat(ctx, st, out), 0
}

// Mknod is mknod(2): a regular file, a FIFO, a socket or a device.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.m.ro {
		return nil, syscall.EROFS
	}
	p := n.child(name)
	var err error
	opts := n.m.createOptions(ctx, name)
	if mode&syscall.S_IFMT == syscall.S_IFREG || mode&syscall.S_IFMT == 0 {
		mode |= syscall.S_IFREG
		err = n.m.fsys.CreateEmptyWith(p, btrfs.FileModeOf(mode&0o7777), opts)
	} else {
		// dev is the kernel's new_encode_dev form.
		major := (dev & 0xfff00) >> 8
		minor := dev&0xff | (dev>>12)&0xfff00
		err = n.m.fsys.MknodWith(p, btrfs.FileModeOf(mode), btrfs.Mkdev(major, minor), opts)
	}
	if err != nil {
		return nil, toErrno(err)
	}
	return n.made(ctx, p, name, mode, out)
}

// Symlink is symlink(2).
func (n *node) Symlink(ctx context.Context, target, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.m.ro {
		return nil, syscall.EROFS
	}
	p := n.child(name)
	if err := n.m.fsys.SymlinkWith(target, p, n.m.createOptions(ctx, name)); err != nil {
		return nil, toErrno(err)
	}
	return n.made(ctx, p, name, syscall.S_IFLNK|0o777, out)
}

// Link is link(2).
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.m.ro {
		return nil, syscall.EROFS
	}
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	p := n.child(name)
	if err := n.m.fsys.Link(t.path(), p); err != nil {
		return nil, toErrno(err)
	}
	_ = t.putGathered() // the attributes returned are t's
	st, errno := n.lookupChild(name)
	if errno != 0 {
		return nil, errno
	}
	n.m.fillAttr(st, &out.Attr)
	return n.newChild(ctx, st), 0
}

// remove takes name out of directory n; an open file's last name goes to
// the orphan directory instead.
func (n *node) remove(name string) syscall.Errno {
	if n.m.ro {
		return syscall.EROFS
	}
	if n.m.hidden(n, name) {
		return syscall.ENOENT
	}
	p := n.child(name)
	if ch := n.GetChild(name); ch != nil {
		if cn, ok := ch.Operations().(*node); ok && n.m.keepOrphan(cn, p) {
			return 0
		}
	}
	return toErrno(n.m.fsys.Remove(p))
}

// Unlink is unlink(2); the kernel has checked that name is no directory.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno { return n.remove(name) }

// Rmdir is rmdir(2); the kernel has checked that name is a directory.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno { return n.remove(name) }

// Rename is rename(2) and renameat2(2) with RENAME_NOREPLACE or
// RENAME_EXCHANGE.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if n.m.ro {
		return syscall.EROFS
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if n.m.hidden(n, name) || n.m.hidden(np, newName) {
		return syscall.EPERM
	}
	from, to := n.child(name), np.child(newName)
	switch flags {
	case 0:
	case renameNoReplace:
		return toErrno(n.m.fsys.RenameNoReplace(from, to))
	case renameExchange:
		return toErrno(n.m.fsys.RenameExchange(from, to))
	default:
		return syscall.EINVAL
	}
	var kept *node
	if ch := np.GetChild(newName); ch != nil {
		// The target's inode loses this name; if it is an open file
		// with no other, keep it for its handles. The rename then
		// finds no target.
		if cn, ok := ch.Operations().(*node); ok {
			if src := n.GetChild(name); (src == nil || src != ch) && n.m.keepOrphan(cn, to) {
				kept = cn
			}
		}
	}
	err := n.m.fsys.Rename(from, to)
	if err != nil && kept != nil {
		// The kernel checked the kinds, so this is rare (no space, a
		// pinned source): put the target back where it was.
		kept.mu.Lock()
		o := kept.orphan
		kept.mu.Unlock()
		if n.m.fsys.Rename(o, to) == nil {
			kept.mu.Lock()
			kept.orphan = ""
			kept.mu.Unlock()
		}
	}
	return toErrno(err)
}

// renameat2 flags.
const (
	renameNoReplace = 1 << 0
	renameExchange  = 1 << 1
)

// Setattr is chmod, chown, truncate and utimes, on a path or an open file.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *gofuse.SetAttrIn, out *gofuse.AttrOut) syscall.Errno {
	if n.m.ro {
		return syscall.EROFS
	}
	_ = n.putGathered() // a truncate comes after the writes before it
	h, _ := f.(*handle)
	if sz, ok := in.GetSize(); ok {
		var err error
		if h != nil {
			err = h.f.Truncate(int64(sz))
		} else {
			err = n.m.fsys.Truncate(n.path(), int64(sz))
		}
		if err != nil {
			return toErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	mode, mok := in.GetMode()
	atime, aok := in.GetATime()
	mtime, tok := in.GetMTime()
	kill := n.killSUIDGID(ctx, in)
	if (uok || gok || mok || aok || tok || kill) && n.byNumber() {
		// One change by inode number that returns the attributes it
		// leaves: no path to resolve, and no search afterwards of
		// the blocks the change has just copied (tar sets owner, mode
		// and times of every file, each its own setattr).
		a := btrfs.AttrChange{UID: -1, GID: -1, KillSUIDGID: kill}
		if uok {
			a.UID = int(uid)
		}
		if gok {
			a.GID = int(gid)
		}
		if mok {
			a.SetMode, a.Mode = true, btrfs.FileModeOf(mode&0o7777)
		}
		if aok {
			a.Atime = &atime
		}
		if tok {
			a.Mtime = &mtime
		}
		st, err := n.m.fsys.SetattrInode(n.sv, n.ino, a)
		if err != nil {
			return toErrno(err)
		}
		n.mu.Lock()
		n.last = st
		st = n.unorphaned(st)
		n.mu.Unlock()
		n.m.fillAttr(st, &out.Attr)
		out.SetTimeout(n.m.attrTimeout)
		return 0
	}
	p := n.path()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		if err := n.m.fsys.Chown(p, u, g); err != nil {
			return toErrno(err)
		}
	}
	if mok {
		if err := n.m.fsys.Chmod(p, btrfs.FileModeOf(mode&0o7777)); err != nil {
			return toErrno(err)
		}
	}
	if aok || tok {
		if !aok || !tok {
			st, errno := n.stat()
			if errno != 0 {
				return errno
			}
			if !aok {
				atime = st.Atime
			}
			if !tok {
				mtime = st.Mtime
			}
		}
		if err := n.m.fsys.Chtimes(p, atime, mtime); err != nil {
			return toErrno(err)
		}
	}
	var st *btrfs.Stat
	var errno syscall.Errno
	if h != nil {
		st, errno = h.stat()
	} else {
		st, errno = n.stat()
	}
	if errno != 0 {
		return errno
	}
	n.m.fillAttr(st, &out.Attr)
	out.SetTimeout(n.m.attrTimeout)
	return 0
}

// setxattr flags.
const (
	xattrCreate  = 1
	xattrReplace = 2
)

// Setxattr is setxattr(2), with XATTR_CREATE and XATTR_REPLACE.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.m.ro {
		return syscall.EROFS
	}
	p := n.path()
	if attr == capsAttr {
		n.mu.Lock()
		n.noCaps = false
		n.mu.Unlock()
	}
	if flags&(xattrCreate|xattrReplace) != 0 {
		_, err := n.m.fsys.Getxattr(p, attr)
		exists := err == nil
		if err != nil && toErrno(err) != syscall.ENODATA {
			return toErrno(err)
		}
		if flags&xattrCreate != 0 && exists {
			return syscall.EEXIST
		}
		if flags&xattrReplace != 0 && !exists {
			return syscall.ENODATA
		}
	}
	return toErrno(n.m.fsys.Setxattr(p, attr, data))
}

// Removexattr is removexattr(2).
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.m.ro {
		return syscall.EROFS
	}
	return toErrno(n.m.fsys.Removexattr(n.path(), attr))
}

// Fsync is fsync(2) of a directory (fsyncdir), a commit of everything
// shared with concurrent callers, or of a file through its handle
// (handle.Fsync, which may write the tree log instead).
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	if n.m.ro {
		return 0
	}
	return toErrno(n.m.fsys.Sync())
}

// fallocate modes.
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
)

// Allocate is fallocate(2): preallocation, with or without KEEP_SIZE, and
// PUNCH_HOLE (which Linux only takes with KEEP_SIZE).
func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	if n.m.ro {
		return syscall.EROFS
	}
	_ = n.putGathered()
	p := n.path()
	switch mode {
	case 0, fallocKeepSize:
		return toErrno(n.m.fsys.Fallocate(p, int64(off), int64(size), mode == fallocKeepSize))
	case fallocPunchHole | fallocKeepSize:
		return toErrno(n.m.fsys.PunchHole(p, int64(off), int64(size)))
	}
	return syscall.EOPNOTSUPP
}

// CopyFileRange is copy_file_range(2): a reflink (FS.Clone) where the
// range is sector aligned, so no data is copied, else a copy.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	if n.m.ro {
		return 0, syscall.EROFS
	}
	hin, ok1 := fhIn.(*handle)
	hout, ok2 := fhOut.(*handle)
	dst, ok3 := out.Operations().(*node)
	if !ok1 || !ok2 || !ok3 {
		return 0, syscall.EXDEV
	}
	// hin.stat puts n's gathered writes in; the copy is written after
	// dst's too, also where it is not a clone.
	_ = dst.putGathered()
	src, errno := hin.stat()
	if errno != 0 {
		return 0, errno
	}
	if offIn >= src.Size {
		return 0, 0
	}
	length = min(length, src.Size-offIn, 1<<30)
	ss := uint64(n.m.bsize)
	if offIn%ss == 0 && offOut%ss == 0 && (length%ss == 0 || offIn+length == src.Size) {
		dstSt, errno := hout.stat()
		if errno == 0 && (length%ss == 0 || offOut+length >= dstSt.Size) {
			err := n.m.fsys.Clone(n.path(), int64(offIn), dst.path(), int64(offOut), int64(length))
			if err == nil {
				return uint32(length), 0
			}
			if toErrno(err) != syscall.EINVAL {
				return 0, toErrno(err)
			}
			// EINVAL: the flags differ (NODATASUM), or the
			// files are not both reachable by path; copy.
		}
	}
	return copyRange(hin.f, int64(offIn), hout.f, int64(offOut), int64(length))
}

// copyRange copies length bytes from src at offIn to dst at offOut.
func copyRange(src *btrfs.File, offIn int64, dst *btrfs.File, offOut, length int64) (uint32, syscall.Errno) {
	buf := make([]byte, min(length, 1<<20))
	var done int64
	for done < length {
		want := min(int64(len(buf)), length-done)
		r, err := src.ReadAt(buf[:want], offIn+done)
		if r > 0 {
			if _, werr := dst.WriteAt(buf[:r], offOut+done); werr != nil {
				return uint32(done), toErrno(werr)
			}
			done += int64(r)
		}
		if errors.Is(err, io.EOF) || r == 0 {
			break
		}
		if err != nil {
			return uint32(done), toErrno(err)
		}
	}
	return uint32(done), 0
}
