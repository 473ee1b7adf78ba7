package cli

import (
	"errors"
	"io/fs"
	pathpkg "path"
	"strings"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs"
)

// cpWithin copies IMAGE:SRC operands to IMAGE:DEST in the same image as
// reflinks (cp --reflink=always): a regular file's copy shares SRC's
// data extents through Clone, so a copy costs metadata only. Directories
// (with -r), symbolic links and special files are made anew. Modes,
// owners and times follow cp's rules as for a copy from the host.
func cpWithin(s *session, srcs []string, last string, o cpOpts) error {
	paths, err := s.paths(append(append([]string(nil), srcs...), last))
	if err != nil {
		return err
	}
	dest := paths[len(paths)-1]
	into := false
	if fi, err := s.fsys.Stat(dest); err == nil && fi.IsDir() {
		into = true
		if dest, err = followLinks(s.fsys, dest); err != nil {
			return err
		}
	}
	if !into && len(srcs) > 1 {
		return &fs.PathError{Op: "cp", Path: s.show(dest), Err: syscall.ENOTDIR}
	}
	c := &cloner{s: s, o: o, now: time.Now(), umask: processUmask()}
	for i, src := range paths[:len(srcs)] {
		if !o.recursive {
			// Without -r a symlink operand is followed, as cp does.
			if src, err = followLinks(s.fsys, src); err != nil {
				return err
			}
		}
		fi, err := s.fsys.Lstat(src)
		if err != nil {
			return err
		}
		if fi.IsDir() && !o.recursive {
			return errors.New("-r not specified; omitting directory " + quoteName(srcs[i]))
		}
		target := dest
		if into && !isDotDir(srcs[i]) {
			target = pathpkg.Join(dest, pathpkg.Base(src))
		}
		if target == src || (fi.IsDir() && strings.HasPrefix(target+"/", src+"/")) {
			return &fs.PathError{Op: "cp", Path: s.show(src), Err: errors.New("cannot copy a file or directory into itself")}
		}
		if err := parentExists(s, target); err != nil {
			return err
		}
		if err := c.tree(src, target); err != nil {
			return err
		}
	}
	return nil
}

// cloner copies trees inside one image.
type cloner struct {
	s     *session
	o     cpOpts
	now   time.Time
	umask uint32
	dirs  []cloned // directories whose times are set last
}

type cloned struct {
	path string
	st   *btrfs.Stat
}

// tree copies src and, for a directory, everything below it to target.
func (c *cloner) tree(src, target string) error {
	c.dirs = c.dirs[:0]
	err := walkTree(c.s.fsys, src, false, func(q string, fi fs.FileInfo) error {
		to := target
		if q != src {
			to = pathpkg.Join(target, q[len(src)+1:])
		}
		if old, err := c.s.fsys.Lstat(to); c.o.verbose && !(err == nil && old.IsDir() && fi.IsDir()) {
			c.s.verbosef("%s -> %s", quoteName(c.s.show(q)), quoteName(c.s.show(to)))
		}
		return c.one(q, to, fi)
	})
	if err != nil {
		return err
	}
	// Set directory times after their contents, deepest first.
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if err := c.times(c.dirs[i].path, c.dirs[i].st); err != nil {
			return err
		}
	}
	return nil
}

// one copies the single entry src (described by fi) to to.
func (c *cloner) one(src, to string, fi fs.FileInfo) error {
	fsys := c.s.fsys
	st := fi.Sys().(*btrfs.Stat)
	perm := btrfs.UnixMode(fi.Mode()) & 0o7777
	if !c.o.preserve {
		perm &^= c.umask | 0o6000
	}
	mode := btrfs.FileModeOf(perm)
	old, err := fsys.Lstat(to)
	exists := err == nil
	switch {
	case exists && fi.IsDir() && old.IsDir():
		// Merge into the directory that is there.
	case exists && c.o.noClobber:
		return nil
	case exists && old.IsDir():
		return &fs.PathError{Op: "cp", Path: c.s.show(to), Err: errors.New("cannot overwrite directory with non-directory")}
	case exists && fi.IsDir():
		return &fs.PathError{Op: "cp", Path: c.s.show(to), Err: errors.New("cannot overwrite non-directory with directory")}
	case exists:
		if err := fsys.Remove(to); err != nil {
			return err
		}
	}
	switch {
	case fi.IsDir():
		if !exists {
			if err := fsys.Mkdir(to, mode); err != nil {
				return err
			}
		}
	case fi.Mode().IsRegular():
		if err := fsys.CreateEmpty(to, mode); err != nil {
			return err
		}
		if fi.Size() > 0 {
			if err := fsys.Clone(src, 0, to, 0, 0); err != nil {
				return err
			}
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := fsys.ReadLink(src)
		if err != nil {
			return err
		}
		if err := fsys.Symlink(t, to); err != nil {
			return err
		}
	default:
		dev := btrfs.Mkdev(st.RdevMajor, st.RdevMinor)
		if err := fsys.Mknod(to, fi.Mode()&(fs.ModeType|fs.ModeCharDevice)|mode, dev); err != nil {
			return err
		}
	}
	if fi.Mode()&fs.ModeSymlink == 0 && (!exists || c.o.preserve) {
		// Mkdir and CreateEmpty leave the mode as given; set it again so
		// that set-id and sticky bits kept by -p are there.
		if err := fsys.Chmod(to, mode); err != nil {
			return err
		}
	}
	if c.o.preserve {
		if err := fsys.Chown(to, int(st.UID), int(st.GID)); err != nil {
			return err
		}
	}
	if c.o.archive {
		xs, err := fsys.Xattrs(src)
		if err != nil {
			return err
		}
		for _, x := range xs {
			if err := fsys.Setxattr(to, x.Name, x.Value); err != nil {
				return err
			}
		}
	}
	if fi.IsDir() {
		c.dirs = append(c.dirs, cloned{to, st})
		return nil
	}
	return c.times(to, st)
}

// times sets the copy's times: the source's with -p, else now.
func (c *cloner) times(to string, st *btrfs.Stat) error {
	if !c.o.preserve {
		return c.s.fsys.Chtimes(to, c.now, c.now)
	}
	return c.s.fsys.Chtimes(to, st.Atime, st.Mtime)
}
