//go:build linux

package fuse

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/gobtrfs/btrfs"
)

// An open file whose last name is removed (unlink, or a rename over it)
// must stay readable and writable until closed. btrfs keeps such inodes
// with an orphan item that the kernel clears at the next mount; the btrfs
// package has no orphan items, and its File finds its inode by number,
// failing once the inode is gone. So the mount keeps the inode alive
// under a name of its own, as NFS clients do (".nfsXXXX"), but in one
// hidden directory at the top of the mount rather than beside the file,
// so that rmdir of the file's directory still works: the last name moves
// there, and the last close removes it. Lookups and listings of the
// mount's top directory never show that directory. A crash leaves the
// moved files behind; the next read-write mount removes them, as the
// kernel's orphan cleanup would. A file in another subvolume than the
// mount's top cannot move there (EXDEV): it is removed at once, and its
// open handles then fail with ENOENT.
const orphanDirName = ".gobtrfs-orphans"

// orphanSeq makes the orphans' names unique within a process.
var orphanSeq atomic.Uint64

// hidden reports whether name in directory n is the orphan directory.
func (m *mount) hidden(n *node, name string) bool {
	return name == orphanDirName && n == m.root
}

// orphanDir is the orphan directory's btrfs path.
func (m *mount) orphanDir() string { return m.path(orphanDirName) }

// keepOrphan moves the file at name, which ch (a node with open handles)
// is, into the orphan directory instead of removing it. It returns false
// when it did not (the caller removes the file then).
func (m *mount) keepOrphan(ch *node, name string) bool {
	ch.mu.Lock()
	open := len(ch.handles) > 0
	ch.mu.Unlock()
	if !open {
		return false
	}
	st, errno := m.lstat(name)
	if errno != 0 || st.Nlink != 1 || st.Mode&0o170000 != 0o100000 {
		// Other names keep the inode alive; only regular files are
		// opened through handles.
		return false
	}
	dir, err := m.makeOrphanDir()
	if err != nil {
		return false
	}
	target := fmt.Sprintf("%s/%d.%d.%d", dir, st.Subvolume, st.Ino, orphanSeq.Add(1))
	if err := m.fsys.Rename(name, target); err != nil {
		return false
	}
	ch.mu.Lock()
	ch.orphan = target
	ch.mu.Unlock()
	return true
}

// dropOrphan removes n's orphan name, once its last handle is closed.
func (m *mount) dropOrphan(n *node) {
	n.mu.Lock()
	o := n.orphan
	if len(n.handles) > 0 || o == "" {
		n.mu.Unlock()
		return
	}
	n.orphan = ""
	n.mu.Unlock()
	if err := m.fsys.Remove(o); err != nil && m.log != nil {
		m.log.Printf("remove orphan %s: %v", o, err)
	}
}

// makeOrphanDir makes the orphan directory unless it exists and returns
// its path.
func (m *mount) makeOrphanDir() (string, error) {
	dir := m.orphanDir()
	if _, err := m.fsys.Lstat(dir); err == nil {
		return dir, nil
	}
	err := m.keepTimes(func() error { return m.fsys.MkdirWith(dir, 0o700, &btrfs.CreateOptions{Exact: true}) })
	if err != nil && toErrno(err) != syscall.EEXIST {
		return "", err
	}
	return dir, nil
}

// keepTimes runs fn, a change of the orphan directory's entry, and puts
// back the access and modification times of the directory holding it:
// the directory is the mount's business, not the user's, and the kernel's
// orphan items change no directory either.
func (m *mount) keepTimes(fn func() error) error {
	st, errno := m.lstat(m.prefix)
	if err := fn(); err != nil {
		return err
	}
	if errno != 0 {
		return nil
	}
	return m.fsys.Chtimes(m.prefix, st.Atime, st.Mtime)
}

// clearOrphans removes the orphan directory and what a crash left in it.
func (m *mount) clearOrphans() error {
	if m.ro {
		return nil
	}
	if _, err := m.fsys.Lstat(m.orphanDir()); err != nil {
		return nil
	}
	return m.keepTimes(func() error { return m.fsys.RemoveAll(m.orphanDir()) })
}

// Tmpfile is open(2) with O_TMPFILE: a new file with no name but one in
// the orphan directory, which goes at the last close unless linkat(2)
// gave it one meanwhile.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.m.ro {
		return nil, nil, 0, syscall.EROFS
	}
	dir := n.m.orphanDir()
	if err := n.m.fsys.MkdirWith(dir, 0o700, &btrfs.CreateOptions{Exact: true}); err != nil && toErrno(err) != syscall.EEXIST {
		return nil, nil, 0, toErrno(err)
	}
	p := fmt.Sprintf("%s/tmpfile.%d", dir, orphanSeq.Add(1))
	// Made in the orphan directory, it still takes from n what the
	// kernel's btrfs gives a file made in n: its default ACL, its
	// set-group-ID group, its flags and compression property.
	opts := n.m.createOptions(ctx, "")
	opts.InheritFrom = n.path()
	if err := n.m.fsys.CreateEmptyWith(p, btrfs.FileModeOf(mode&0o7777), opts); err != nil {
		return nil, nil, 0, toErrno(err)
	}
	// Its directory is the orphan directory, not n: found by path.
	ch, errno := n.made(ctx, p, "", syscall.S_IFREG|mode&0o7777, out)
	if errno != 0 {
		_ = n.m.fsys.Remove(p)
		return nil, nil, 0, errno
	}
	cn := ch.Operations().(*node)
	cn.mu.Lock()
	cn.orphan = p
	cn.mu.Unlock()
	out.Attr.Nlink = 0
	f, err := cn.openFile()
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	return ch, cn.open(f, true), gofuse.FOPEN_KEEP_CACHE, 0
}
