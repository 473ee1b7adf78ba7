//go:build linux

package fuse

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"log"
	"os"
	"path"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/gobtrfs/btrfs"
)

// Server is a mounted filesystem. Wait blocks until it is unmounted;
// Unmount unmounts it. Neither closes the btrfs.FS: the caller does,
// after Wait, so that Close commits what is left.
type Server struct {
	srv *gofuse.Server
	m   *mount
}

// Mount shows fsys (opened with btrfs.Open or btrfs.OpenWritable) at the
// directory dir and serves it until it is unmounted. opts may be nil.
func Mount(dir string, fsys *btrfs.FS, opts *Options) (*Server, error) {
	if opts == nil {
		opts = &Options{}
	}
	m, err := newMount(fsys, opts)
	if err != nil {
		return nil, err
	}
	st, errno := m.lstat(m.prefix)
	if errno != 0 {
		return nil, fmt.Errorf("mount %s: %s: %w", dir, m.prefix, errno)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("mount %s: %s is not a directory", dir, m.prefix)
	}
	m.inos.root = st.Subvolume
	root := &node{m: m, sv: st.Subvolume, ino: st.Ino, last: st}
	m.root = root
	if err := m.clearOrphans(); err != nil {
		return nil, fmt.Errorf("mount %s: remove what a crash left in %s: %w", dir, m.orphanDir(), err)
	}
	entry, attr := opts.timeouts()
	m.attrTimeout = attr
	negative := time.Duration(0)
	name := opts.FsName
	if name == "" {
		name = "gobtrfs"
	}
	fo := &fs.Options{
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &negative,
		// Modes are the filesystem's, 0 included: no 0755 default.
		NullPermissions: true,
		RootStableAttr:  &fs.StableAttr{Ino: st.Ino, Gen: st.Generation},
		MountOptions: gofuse.MountOptions{
			AllowOther: opts.AllowOther,
			FsName:     name,
			Name:       "btrfs",
			Debug:      opts.Debug,
			// A FUSE write carries at most MaxWrite bytes; 1 MiB
			// rather than go-fuse's 128 KiB default makes large
			// writes fewer round trips and larger extents.
			MaxWrite:     1 << 20,
			MaxReadAhead: 1 << 20,
			EnableAcl:    kernelChecks(opts),
			// The umask is applied by the btrfs package, which knows
			// when a default ACL overrules it (umask_linux.go).
			// The filesystem clears set-id bits on write, truncate
			// and chown (killpriv_linux.go), which spares a
			// GETXATTR per write and a GETATTR per chown.
			ExtraCapabilities:  gofuse.CAP_DONT_MASK | gofuse.CAP_HANDLE_KILLPRIV_V2,
			DisableReadDirPlus: false,
		},
	}
	if opts.Logger != nil {
		fo.Logger = opts.Logger
		fo.MountOptions.Logger = opts.Logger
	}
	if opts.DefaultPermissions {
		fo.MountOptions.Options = append(fo.MountOptions.Options, "default_permissions")
	}
	if m.ro {
		fo.MountOptions.Options = append(fo.MountOptions.Options, "ro")
	}
	rawFS := &umaskFS{RawFileSystem: fs.NewNodeFS(root, fo), t: &m.umasks, k: &m.kills}
	srv, err := gofuse.NewServer(rawFS, dir, &fo.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		_ = srv.Unmount()
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	return &Server{srv: srv, m: m}, nil
}

// kernelChecks reports whether the kernel is to check permissions, with
// POSIX ACLs, before it passes a request on: when default_permissions is
// asked for, when other users may reach the mount (allow_other), and when
// the mounting user is not root. FUSE_POSIX_ACL, which go-fuse's EnableAcl
// asks for, turns on both the kernel's ACL handling and
// default_permissions. Left is a mount by root for root alone: FUSE lets
// only processes whose user and group ids all equal the mounter's in
// (fuse_allow_current_process), so every caller is root, for whom the
// checks allow everything but executing a file without an execute bit,
// which FUSE checks without default_permissions too. There the checks
// only cost requests: every change in a directory marks its attributes
// stale (fuse_dir_changed), and the check of the next name in it asks
// for them again, one GETATTR per file created or removed
// (docs/design/0011-fuse-mount.md, "Untar" and "rm -rf").
func kernelChecks(opts *Options) bool {
	return opts.DefaultPermissions || opts.AllowOther || os.Getuid() != 0 || os.Geteuid() != 0
}

// Wait blocks until the filesystem is unmounted (by Unmount, umount(8) or
// fusermount3 -u).
// Files that were open after their last name went are gone by then.
func (s *Server) Wait() {
	s.srv.Wait()
	// Every handle was released, which put its writes in; a buffer
	// left by a request that raced the unmount goes in here.
	s.m.putAllGathered()
	if err := s.m.clearOrphans(); err != nil && s.m.log != nil {
		s.m.log.Printf("remove %s: %v", s.m.orphanDir(), err)
	}
}

// Unmount unmounts the filesystem; it fails (EBUSY) while files are open,
// as umount does.
func (s *Server) Unmount() error { return s.srv.Unmount() }

// mount is what every node of one mount shares.
type mount struct {
	fsys   *btrfs.FS // immutable
	ro     bool      // refuse every change with EROFS; immutable
	prefix string    // the shown directory's path in fsys ("." for the top level); immutable
	bsize  uint32    // st_blksize and the statfs block size; immutable
	root   *node     // immutable after Mount
	opts   Options   // immutable
	// attrTimeout is how long the kernel may keep attributes we
	// return (fs.Options.AttrTimeout, which go-fuse does not apply to
	// setattr replies); immutable after Mount.
	attrTimeout time.Duration
	inos        inoMap
	log         *log.Logger
	// umasks carries the umask of create requests past go-fuse's
	// node API (umask_linux.go).
	umasks umaskTable
	// kills carries WRITE_KILL_SUIDGID past go-fuse's file API
	// (killpriv_linux.go).
	kills killTable
	// gather tracks the inodes holding gathered writes
	// (gather_linux.go).
	gather gathering
}

func newMount(fsys *btrfs.FS, opts *Options) (*mount, error) {
	m := &mount{fsys: fsys, ro: opts.ReadOnly, prefix: ".", bsize: fsys.SectorSize(), log: opts.Logger, opts: *opts}
	if !m.ro {
		// A read-only FS has no write counters: that is how its kind
		// shows through the public API.
		if _, err := fsys.WriteCounters(); err != nil {
			m.ro = true
		}
	}
	if !m.ro && !opts.NoGather {
		m.lookAtSpace(time.Now().UnixNano())
	}
	switch {
	case opts.Subvol != "":
		m.prefix = path.Clean(opts.Subvol)
		for len(m.prefix) > 0 && m.prefix[0] == '/' {
			m.prefix = m.prefix[1:]
		}
		if m.prefix == "" {
			m.prefix = "."
		}
	default:
		id := opts.SubvolID
		if id == 0 {
			var err error
			if id, err = fsys.DefaultSubvolume(); err != nil {
				return nil, err
			}
		}
		p, err := subvolPath(fsys, id)
		if err != nil {
			return nil, err
		}
		m.prefix = p
	}
	return m, nil
}

// subvolPath returns the path of subvolume id from the top level. Paths,
// not Subvolume views, are how a subvolume is shown: views refuse changes,
// and paths reach into nested subvolumes for reading and writing alike.
func subvolPath(fsys *btrfs.FS, id uint64) (string, error) {
	if id == 5 {
		return ".", nil
	}
	subs, err := fsys.Subvolumes()
	if err != nil {
		return "", err
	}
	for _, s := range subs {
		if s.ID == id {
			return s.Path, nil
		}
	}
	return "", fmt.Errorf("subvolume %d: %w", id, errors.New("no such subvolume"))
}

// path returns the btrfs path of rel, a path below the mount point.
func (m *mount) path(rel string) string {
	if rel == "" {
		return m.prefix
	}
	if m.prefix == "." {
		return rel
	}
	return m.prefix + "/" + rel
}

// lstat describes name without following a final symlink.
func (m *mount) lstat(name string) (*btrfs.Stat, syscall.Errno) {
	return statOf(m.fsys.Lstat(name))
}

// statOf is the btrfs.Stat of a FileInfo the btrfs package gave.
func statOf(fi iofs.FileInfo, err error) (*btrfs.Stat, syscall.Errno) {
	if err != nil {
		return nil, toErrno(err)
	}
	st, ok := fi.Sys().(*btrfs.Stat)
	if !ok {
		return nil, syscall.EIO
	}
	return st, 0
}

// fillAttr copies st into out as stat(2) shows it.
func (m *mount) fillAttr(st *btrfs.Stat, out *gofuse.Attr) {
	out.Ino = m.inos.ino(st.Subvolume, st.Ino)
	out.Size = st.Size
	out.Blocks = (st.NBytes + 511) / 512
	out.Mode = st.Mode
	out.Nlink = st.Nlink
	out.Uid, out.Gid = st.UID, st.GID
	// FUSE carries the kernel's 32-bit new_encode_dev form, which is
	// the low half of the user-space encoding btrfs.Mkdev spells out
	// for every device number btrfs can hold.
	out.Rdev = uint32(btrfs.Mkdev(st.RdevMajor, st.RdevMinor))
	out.Blksize = m.bsize
	a, mt, c := st.Atime, st.Mtime, st.Ctime
	out.SetTimes(&a, &mt, &c)
}

// stable is the identity go-fuse keeps a node under.
func (m *mount) stable(st *btrfs.Stat) fs.StableAttr {
	return fs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Ino: m.inos.ino(st.Subvolume, st.Ino), Gen: st.Generation}
}
