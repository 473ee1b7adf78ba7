package mkfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// CopyOptions choose what CopyInto keeps of the entries it copies. The
// zero value behaves like cp(1) without --preserve run by root: contents
// and permission bits (less Umask and the set-id bits), owner root, times
// now, no extended attributes.
type CopyOptions struct {
	// KeepMode keeps permission, set-id and sticky bits as the source
	// gives them; otherwise they are masked with Umask and lose set-id.
	KeepMode bool
	// Umask is cleared from the permission bits without KeepMode (cp
	// uses the process umask; 0o022 is the usual one).
	Umask uint32
	// KeepOwner keeps owners; otherwise everything belongs to root.
	KeepOwner bool
	// KeepTimes keeps access and modification times (nanoseconds);
	// otherwise everything gets the time CopyInto started.
	KeepTimes bool
	// KeepXattrs copies extended attributes.
	KeepXattrs bool
	// Progress, if set, is called after each entry with its data bytes.
	Progress func(bytes int64)
	// NoClobber leaves every existing non-directory in dest alone and
	// skips the source entry that would replace it (cp -n).
	NoClobber bool
	// Copying, if set, is called before each entry is applied with its
	// path in the source ("." for the root) and in fsys (cp -v).
	Copying func(srcPath, destPath string)
}

// CopyInto applies the entries of src to fsys, an already open writable
// filesystem, with the source's root (".") becoming dest, an io/fs path.
// It is Build's filler run against an existing tree: dest's parent must be
// a directory; directories that exist already are merged into (their
// attributes set when the source names them), any other existing file in
// the way is replaced (as cp --remove-destination), a directory in the
// way of a non-directory is an error. Hardlinks of the source become
// hardlinks, the times of directories it creates are set last.
//
// Nothing is committed: the caller commits (or drops the changes by
// closing fsys) so that a whole copy is one transaction.
func CopyInto(fsys *btrfs.FS, src Source, dest string, opts CopyOptions) error {
	return CopyIntoContext(context.Background(), fsys, src, dest, opts)
}

// CopyIntoContext is CopyInto that stops between entries (with ctx's
// error) once ctx is done; nothing is committed either way.
func CopyIntoContext(ctx context.Context, fsys *btrfs.FS, src Source, dest string, opts CopyOptions) error {
	dest = cleanDest(dest)
	bo := BuildOptions{Progress: opts.Progress}
	if !opts.KeepOwner {
		bo.Owner = &Owner{}
	}
	f := &filler{ctx: ctx, fsys: fsys, opts: &bo, nodeSize: int(fsview.Of(fsys).Superblock().NodeSize),
		dirs: map[string]*dirState{}, now: time.Now(), copying: true}
	if !opts.KeepMode {
		umask := opts.Umask
		f.chmod = func(_ Kind, perm uint32) uint32 { return perm &^ umask &^ 0o6000 }
	}
	if dest != "." {
		parent := pathpkg.Dir(dest)
		if !f.isDir(parent) {
			return &fs.PathError{Op: "copy", Path: parent, Err: syscall.ENOTDIR}
		}
		for p := parent; ; p = pathpkg.Dir(p) {
			f.dirs[p] = &dirState{existed: true}
			if p == "." {
				break
			}
		}
	}
	return f.fill(&destSource{fsys: fsys, src: src, dest: dest, opts: &opts})
}

// cleanDest makes dest an io/fs path, "." for the top.
func cleanDest(dest string) string {
	dest = strings.TrimPrefix(pathpkg.Clean("/"+dest), "/")
	if dest == "" {
		return "."
	}
	return dest
}

// isDir reports whether p is a directory in the filesystem (not following
// a final symlink).
func (f *filler) isDir(p string) bool {
	fi, err := f.fsys.Lstat(p)
	return err == nil && fi.IsDir()
}

// replace clears the way for a non-directory at p when copying: an
// existing non-directory is removed, a directory is an error. Build never
// finds anything in the way, so it does nothing there.
func (f *filler) replace(p string, k Kind) error {
	if !f.copying {
		return nil
	}
	fi, err := f.fsys.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return &fs.PathError{Op: "copy " + k.String(), Path: p, Err: fmt.Errorf("cannot overwrite directory: %w", syscall.EISDIR)}
	}
	return f.fsys.Remove(p)
}

// destSource moves the entries of src below dest and drops what the copy
// options do not keep.
type destSource struct {
	fsys *btrfs.FS // for NoClobber
	src  Source
	dest string
	opts *CopyOptions
}

func (d *destSource) under(p string) string {
	if p == "." {
		return d.dest
	}
	return pathpkg.Join(d.dest, p)
}

func (d *destSource) Next() (*Entry, error) {
	for {
		e, srcPath, err := d.next()
		if err != nil {
			return nil, err
		}
		if d.opts.NoClobber && e.Kind != KindDir {
			if _, err := d.fsys.Lstat(e.Path); !errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		if d.opts.Copying != nil {
			d.opts.Copying(srcPath, e.Path)
		}
		return e, nil
	}
}

// next is Next without NoClobber's skipping; it also returns the entry's
// path in the source.
func (d *destSource) next() (*Entry, string, error) {
	e, err := d.src.Next()
	if err != nil {
		return nil, "", err
	}
	// The root of the source may be a single file (OpenPath); CleanPath
	// would not allow a non-directory at "." so check the path here.
	if e.Path != "." {
		p, err := CleanPath(e.Path)
		if err != nil {
			return nil, "", err
		}
		if p != e.Path {
			return nil, "", inputErr(e.Path, "path not clean (want %q)", p)
		}
	}
	srcPath := e.Path
	e.Path = d.under(e.Path)
	if e.Kind == KindHardlink {
		e.LinkOf = d.under(e.LinkOf)
	}
	if !d.opts.KeepTimes {
		e.Atime, e.Mtime = time.Time{}, time.Time{}
	}
	if !d.opts.KeepXattrs {
		e.Xattrs = nil
	}
	return e, srcPath, nil
}

func (d *destSource) Close() error { return d.src.Close() }

// PathOptions choose how OpenPath reads the host.
type PathOptions struct {
	// Follow follows hostPath itself when it is a symbolic link (cp does
	// for a non-recursive copy); links below it are never followed.
	Follow bool
	// Hardlinks reports further names of a file already seen as
	// KindHardlink entries (cp -a); otherwise every name is its own copy.
	Hardlinks bool
}

// OpenPath returns a Source for any host path: a directory walks its tree
// as OpenDir does, anything else (a file, a symlink, a device) is a
// single entry. Its root entry is "." even when that is not a directory,
// which only CopyInto accepts (Build wants a directory at the top).
func OpenPath(hostPath string, o PathOptions) (Source, error) {
	abs, err := filepath.Abs(hostPath)
	if err != nil {
		return nil, err
	}
	if o.Follow {
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return nil, err
		}
	}
	if _, err := os.Lstat(abs); err != nil {
		return nil, err
	}
	ds := &DirSource{root: abs, links: map[devIno]string{}}
	if abs != string(filepath.Separator) {
		// Walk from the parent, starting at the one name, so that the
		// root is lstat'ed (not followed) like every other entry.
		ds.root, ds.start = filepath.Dir(abs), true
		ds.stack = [][]string{{filepath.Base(abs)}}
	}
	return &pathSource{ds: ds, prefix: filepath.Base(abs), sub: ds.start, hardlinks: o.Hardlinks}, nil
}

// pathSource renames the entries of a DirSource walked from a parent
// directory so that the named path is ".".
type pathSource struct {
	ds        *DirSource
	prefix    string
	sub       bool // entries are prefix/...; false when walking "/" itself
	hardlinks bool
}

func (s *pathSource) strip(p string) string {
	if !s.sub {
		return p
	}
	if p == s.prefix {
		return "."
	}
	return strings.TrimPrefix(p, s.prefix+"/")
}

func (s *pathSource) Next() (*Entry, error) {
	if !s.hardlinks {
		// Forget every inode seen, so no name is reported as a link.
		clear(s.ds.links)
	}
	e, err := s.ds.Next()
	if err != nil {
		return nil, err
	}
	e.Path = s.strip(e.Path)
	if e.Kind == KindHardlink {
		e.LinkOf = s.strip(e.LinkOf)
	}
	return e, nil
}

func (s *pathSource) Close() error { return s.ds.Close() }
