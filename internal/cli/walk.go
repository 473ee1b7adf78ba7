package cli

import (
	"io/fs"
	pathpkg "path"

	"github.com/gobtrfs/btrfs"
)

// walkTree calls fn for p and, when p is a directory, for everything below
// it, never following symbolic links (as chmod -R, chown -R and rm -r
// walk). Parents come before their entries unless post is set, when they
// come after them (the order rm -v reports removals in). Entries come in
// the order ReadDir returns them.
func walkTree(fsys *btrfs.FS, p string, post bool, fn func(q string, fi fs.FileInfo) error) error {
	fi, err := fsys.Lstat(p)
	if err != nil {
		return err
	}
	return walkFrom(fsys, p, fi, post, fn)
}

func walkFrom(fsys *btrfs.FS, p string, fi fs.FileInfo, post bool, fn func(string, fs.FileInfo) error) error {
	if !post {
		if err := fn(p, fi); err != nil {
			return err
		}
	}
	if fi.IsDir() {
		ents, err := fsys.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			q := pathpkg.Join(p, e.Name())
			ei, err := e.Info()
			if err != nil {
				return err
			}
			if err := walkFrom(fsys, q, ei, post, fn); err != nil {
				return err
			}
		}
	}
	if post {
		return fn(p, fi)
	}
	return nil
}
