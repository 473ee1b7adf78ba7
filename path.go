package btrfs

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"
)

// maxSymlinks bounds symlink resolution, as Linux's 40 (ELOOP).
const maxSymlinks = 40

// errNotDir and errLoop are the errno-style errors path walking reports.
var (
	errNotDir = syscall.ENOTDIR
	errLoop   = syscall.ELOOP
)

// walk resolves name (an io/fs path, "." for the root) from the view's root.
// A symlink as the last component is followed when follow is true; symlinks
// in the middle are always followed. Absolute targets resolve from the
// view's root, since the image's own mount point is unknown.
func (fsys *FS) walk(op, name string, follow bool) (*inode, error) {
	if !validPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	in, err := fsys.walkFrom(name, follow)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return in, nil
}

// rootInode loads the view's root directory from its subvolume's current
// root (a writable FS moves the root at every change).
func (fsys *FS) rootInode() (*inode, error) {
	sv := fsys.top
	if fsys.w != nil {
		var err error
		if sv, err = fsys.subvolume(sv.id); err != nil {
			return nil, err
		}
	}
	return fsys.loadInode(sv, sv.dirID)
}

func (fsys *FS) walkFrom(name string, follow bool) (*inode, error) {
	root, err := fsys.rootInode()
	if err != nil {
		return nil, err
	}
	// stack holds the directories from the root to cur, for "..".
	stack := []*inode{root}
	todo := splitPath(name)
	links := 0
	for len(todo) > 0 {
		comp := todo[0]
		todo = todo[1:]
		cur := stack[len(stack)-1]
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if !cur.isDir() {
			return nil, errNotDir
		}
		e, ok, err := fsys.lookup(cur, comp)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fs.ErrNotExist
		}
		next, err := fsys.resolveEntry(cur, e)
		if err != nil {
			return nil, err
		}
		if next.isSymlink() && (len(todo) > 0 || follow) {
			if links++; links > maxSymlinks {
				return nil, errLoop
			}
			target, err := fsys.readlink(next)
			if err != nil {
				return nil, err
			}
			if strings.HasPrefix(target, "/") {
				stack = stack[:1]
			}
			todo = append(splitPath(target), todo...)
			continue
		}
		stack = append(stack, next)
	}
	return stack[len(stack)-1], nil
}

// validPath is fs.ValidPath without its UTF-8 rule: btrfs names are bytes,
// and a name the kernel shows must be reachable even when it is not UTF-8.
func validPath(name string) bool {
	if name == "." {
		return true
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
	}
	return true
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// baseName is the name FileInfo reports for an io/fs path.
func baseName(name string) string {
	if name == "." {
		return "."
	}
	return path.Base(name)
}

// isNotExist helps callers that map errors.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
