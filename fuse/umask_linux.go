//go:build linux

package fuse

import (
	"context"
	"sync"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/gobtrfs/btrfs"
)

// The kernel leaves the umask to the filesystem (the mount asks for
// CAP_DONT_MASK): a directory's default POSIX ACL overrules the umask of
// the process that creates in it, and only the btrfs package, which
// makes the inode and reads the ACL in one change, can tell which
// applies. The kernel sends the umask with create, mkdir, mknod and
// tmpfile requests, but go-fuse's node API drops it: umaskFS, in front
// of go-fuse's bridge, keeps it in the mount's umaskTable for the node
// method that the same request calls.

// umaskKey names one request for a new inode: the calling thread and the
// name. A thread makes one request at a time (the system call waits for
// the answer), so no two running requests share a key.
type umaskKey struct {
	pid  uint32
	name string
}

// umaskTable holds the umasks of the running create requests.
type umaskTable struct {
	mu sync.Mutex
	m  map[umaskKey]uint32 // protected by mu
}

// put records the umask of a request until the returned func is called.
func (t *umaskTable) put(pid uint32, name string, umask uint32) func() {
	k := umaskKey{pid, name}
	t.mu.Lock()
	if t.m == nil {
		t.m = map[umaskKey]uint32{}
	}
	t.m[k] = umask
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.m, k)
		t.mu.Unlock()
	}
}

// get returns the umask of the running request of pid for name; 0 when
// none is recorded (a kernel that masks itself sends a masked mode).
func (t *umaskTable) get(pid uint32, name string) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[umaskKey{pid, name}]
}

// umaskFS is go-fuse's raw filesystem with the umask of create requests
// recorded for the node methods.
type umaskFS struct {
	gofuse.RawFileSystem
	t *umaskTable
	k *killTable // the writes that clear set-id bits (killpriv_linux.go)
}

func (u *umaskFS) Create(cancel <-chan struct{}, in *gofuse.CreateIn, name string, out *gofuse.CreateOut) gofuse.Status {
	defer u.t.put(in.Pid, name, in.Umask)()
	return u.RawFileSystem.Create(cancel, in, name, out)
}

func (u *umaskFS) Mkdir(cancel <-chan struct{}, in *gofuse.MkdirIn, name string, out *gofuse.EntryOut) gofuse.Status {
	defer u.t.put(in.Pid, name, in.Umask)()
	return u.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (u *umaskFS) Mknod(cancel <-chan struct{}, in *gofuse.MknodIn, name string, out *gofuse.EntryOut) gofuse.Status {
	defer u.t.put(in.Pid, name, in.Umask)()
	return u.RawFileSystem.Mknod(cancel, in, name, out)
}

func (u *umaskFS) Tmpfile(cancel <-chan struct{}, in *gofuse.CreateIn, out *gofuse.CreateOut) gofuse.Status {
	defer u.t.put(in.Pid, "", in.Umask)()
	return u.RawFileSystem.Tmpfile(cancel, in, out)
}

// createOptions is how an inode called name is made for the request of
// ctx: owned by its caller, with its umask. The btrfs package applies the
// rest as Linux does: the group and set-group-ID bit of a set-group-ID
// directory, the directory's default ACL.
func (m *mount) createOptions(ctx context.Context, name string) *btrfs.CreateOptions {
	// The mount's nodatacow/nodatasum go into the same change as the
	// new file, as the kernel sets them when it makes the inode.
	o := &btrfs.CreateOptions{NoDataCow: m.opts.NoDataCow, NoDataSum: m.opts.NoDataSum}
	if c, ok := gofuse.FromContext(ctx); ok {
		o.UID, o.GID = c.Uid, c.Gid
		o.Umask = btrfs.FileModeOf(m.umasks.get(c.Pid, name) & 0o777)
	}
	return o
}
