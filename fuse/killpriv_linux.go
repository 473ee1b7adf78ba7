//go:build linux

package fuse

import (
	"context"
	"sync"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/gobtrfs/btrfs"
)

// The mount asks for CAP_HANDLE_KILLPRIV_V2: the filesystem, not the
// kernel, clears the set-user-ID and set-group-ID bits when a file is
// written, truncated or given away, as Linux does. The kernel then marks
// its superblock SB_NOSEC, so a write no longer asks for the file's
// security.capability (one GETXATTR per write(2) before) and a chown no
// longer reads the attributes back first (one GETATTR per chown). It
// tells the filesystem when to clear instead (docs/design/0011, "Speed"):
//
//   - a write by a process without CAP_FSETID carries
//     WRITE_KILL_SUIDGID (killpriv_linux.go: umaskFS.Write, handle.Write);
//   - a truncate without CAP_FSETID and a chown of anything but a
//     directory carry FATTR_KILL_SUIDGID (node.Setattr; btrfs.Chown
//     clears the bits anyway);
//   - when the kernel's own check (file_remove_privs: fallocate,
//     copy_file_range, a write; chown to -1 and -1) finds something to
//     clear, it sends a setattr with no attribute at all. From a caller
//     other than root that is a request to clear the bits. From root
//     (CAP_FSETID) it is one only when the file has no
//     security.capability (node.noCaps, which the kernel's check has just
//     filled by asking): otherwise it follows the kernel's removal of
//     that attribute, and the bits stay.
//
// Security.capability stays the kernel's: it removes the attribute
// (removexattr) before it sends the setattr.

// killTable holds the threads whose running write request carries
// WRITE_KILL_SUIDGID, which go-fuse's file API drops. A thread makes one
// write at a time (the system call waits for its answer; the mount does
// not ask for asynchronous direct I/O).
type killTable struct {
	mu sync.Mutex
	m  map[uint32]bool // protected by mu
}

// put records that pid's running write is to clear the set-id bits.
func (t *killTable) put(pid uint32) func() {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[uint32]bool{}
	}
	t.m[pid] = true
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.m, pid)
		t.mu.Unlock()
	}
}

// get reports whether pid's running write is to clear the set-id bits.
func (t *killTable) get(pid uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[pid]
}

func (u *umaskFS) Write(cancel <-chan struct{}, in *gofuse.WriteIn, data []byte) (uint32, gofuse.Status) {
	if in.WriteFlags&gofuse.WRITE_KILL_SUIDGID != 0 {
		defer u.k.put(in.Pid)()
	}
	return u.RawFileSystem.Write(cancel, in, data)
}

// killBeforeWrite clears the set-id bits of the file of h before a write
// that asks for it.
func (h *handle) killBeforeWrite(ctx context.Context) syscall.Errno {
	c, ok := gofuse.FromContext(ctx)
	if !ok || !h.n.m.kills.get(c.Pid) || !h.n.byNumber() {
		return 0
	}
	_, err := h.n.m.fsys.SetattrInode(h.n.sv, h.n.ino, btrfs.AttrChange{UID: -1, GID: -1, KillSUIDGID: true})
	return toErrno(err)
}

// attrBits are the setattr fields that name an attribute to set.
const attrBits = gofuse.FATTR_MODE | gofuse.FATTR_UID | gofuse.FATTR_GID | gofuse.FATTR_SIZE |
	gofuse.FATTR_ATIME | gofuse.FATTR_MTIME | gofuse.FATTR_ATIME_NOW | gofuse.FATTR_MTIME_NOW |
	gofuse.FATTR_CTIME | gofuse.FATTR_KILL_SUIDGID

// killSUIDGID reports whether setattr in asks to clear the set-id bits
// of n: FATTR_KILL_SUIDGID, or no attribute at all (see above). A chown
// to -1 and -1 by root of a file with a security.capability keeps the
// bits, where Linux clears them: its empty setattr looks like the one
// after a removal of the attribute alone.
func (n *node) killSUIDGID(ctx context.Context, in *gofuse.SetAttrIn) bool {
	if in.Valid&gofuse.FATTR_KILL_SUIDGID != 0 {
		return true
	}
	if in.Valid&attrBits != 0 {
		return false
	}
	if c, ok := gofuse.FromContext(ctx); ok && c.Uid != 0 {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.noCaps
}
