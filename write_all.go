package btrfs

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// MkdirAll makes directory name and every missing parent, each with
// permission bits perm, like os.MkdirAll: existing directories are fine,
// an existing non-directory on the way (or at name) is ENOTDIR. All of it
// is one change: on an error nothing is made.
func (fsys *FS) MkdirAll(name string, perm fs.FileMode) error {
	return fsys.change("mkdir", name, func(c *wctx) (bool, error) {
		cur, err := c.resolve(".")
		if err != nil {
			return false, err
		}
		comps := splitPath(name)
		i := 0
		for ; i < len(comps); i++ {
			de, err := c.dirEntry(cur.ino, comps[i])
			if err != nil {
				return false, err
			}
			if de == nil {
				break
			}
			if cur, err = c.enter(de); err != nil {
				return false, err
			}
			if cur.item.IsSymlink() {
				// Follow it, as mkdir -p does: walk the path so far again,
				// links and all.
				ino, err := c.walkDirs(comps[:i+1])
				if err != nil {
					return false, err
				}
				if cur, err = c.inode(ino); err != nil {
					return false, err
				}
			}
			if !cur.item.IsDir() {
				return false, syscall.ENOTDIR
			}
		}
		rest := comps[i:]
		for _, comp := range rest {
			if len(comp) > disk.NameMax {
				return false, syscall.ENAMETOOLONG
			}
			if strings.IndexByte(comp, 0) >= 0 {
				return false, syscall.EINVAL
			}
		}
		for n, comp := range rest {
			if err := canAddEntry(cur); err != nil {
				return n > 0, err
			}
			ino, err := c.newIno()
			if err != nil {
				return n > 0, err
			}
			index, err := c.nextIndex(cur.ino)
			if err != nil {
				return n > 0, err
			}
			if err := c.link(newPlace{parent: cur, base: comp, ino: ino, index: index, from: cur}, disk.ModeDir|UnixMode(perm)&0o7777, nil); err != nil {
				return true, err
			}
			if cur, err = c.inode(ino); err != nil {
				return true, err
			}
		}
		return len(rest) > 0, nil
	})
}

// RemoveAll removes name and everything under it, like os.RemoveAll: a
// missing name (or parent) is no error; "." is EINVAL. It walks the
// running transaction's directories (their DIR_INDEX items), so it sees
// uncommitted entries. Everything is checked before the first removal,
// so that an expected error (EXDEV for a subvolume inside, what
// checkRemovable refuses, corruption met on the walk) removes nothing.
func (fsys *FS) RemoveAll(name string) error {
	return fsys.change("removeall", name, func(c *wctx) (bool, error) {
		if name == "." {
			return false, syscall.EINVAL
		}
		parent, base, err := c.splitParent(name)
		if errors.Is(err, syscall.ENOENT) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		de, err := c.dirEntry(parent.ino, base)
		if err != nil || de == nil {
			return false, err
		}
		steps, err := c.planRemoveAll(parent.ino, base, de)
		if err != nil {
			return false, err
		}
		for _, s := range steps {
			if err := c.removeStep(s); err != nil {
				return true, err
			}
		}
		return true, nil
	})
}

// rmStep is one name RemoveAll takes away: name in directory parent.
type rmStep struct {
	parent disk.ObjectID
	name   string
	ino    disk.ObjectID
	dir    bool
	done   bool // a directory whose entries are already planned
}

// planRemoveAll lists the names under (and including) base in parent,
// children before their directory, and checks that all can go. It walks
// with an explicit stack, so a deep tree cannot exhaust the goroutine
// stack, and refuses a directory met twice (a loop in a damaged tree).
func (c *wctx) planRemoveAll(parent disk.ObjectID, base string, de *disk.DirItem) ([]rmStep, error) {
	if de.Location.Type != disk.InodeItemKey {
		return nil, syscall.EXDEV
	}
	if pin, err := c.inode(parent); err != nil || notPinned(pin) != nil {
		if err == nil {
			err = syscall.EPERM
		}
		return nil, err
	}
	var steps []rmStep
	drops := map[disk.ObjectID]bool{} // non-directories losing a name
	seen := map[disk.ObjectID]bool{}
	stack := []rmStep{{parent: parent, name: base, ino: de.Location.ObjectID, dir: de.Type.Base() == disk.FtDir}}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !s.dir || s.done {
			steps = append(steps, s)
			if !s.dir {
				drops[s.ino] = true
			}
			continue
		}
		if seen[s.ino] || s.ino == c.rootDir {
			k := disk.Key{ObjectID: s.ino, Type: disk.InodeItemKey}
			return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "directory reached twice (loop in the tree)"}
		}
		seen[s.ino] = true
		s.done = true
		stack = append(stack, s)
		children, err := c.dirChildren(s.ino)
		if err != nil {
			return nil, err
		}
		stack = append(stack, children...)
	}
	for ino := range drops {
		in, err := c.inode(ino)
		if err != nil {
			return nil, err
		}
		if in.item.IsDir() {
			k := disk.Key{ObjectID: ino, Type: disk.InodeItemKey}
			return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "directory entry of a directory says it is not one"}
		}
		if err := c.checkRemovable(in); err != nil {
			return nil, err
		}
	}
	return steps, nil
}

// dirChildren returns the entries of directory dir from its DIR_INDEX
// items, as steps to plan. It checks what the removals will rely on: each
// entry is an inode (EXDEV for a subvolume), has its DIR_ITEM, and the
// names add up to the directory's size.
func (c *wctx) dirChildren(dir disk.ObjectID) ([]rmStep, error) {
	din, err := c.inode(dir)
	if err == nil {
		err = notPinned(din)
	}
	if err != nil {
		return nil, err
	}
	if !din.item.IsDir() {
		k := disk.Key{ObjectID: dir, Type: disk.InodeItemKey}
		return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "directory entry of a non-directory says it is one"}
	}
	var out []rmStep
	var size uint64
	err = c.tr.Range(c.tx, disk.Key{ObjectID: dir, Type: disk.DirIndexKey},
		disk.Key{ObjectID: dir, Type: disk.DirIndexKey, Offset: ^uint64(0)},
		func(k disk.Key, data []byte) (bool, error) {
			items, err := disk.ParseDirItems(data)
			if err != nil || len(items) != 1 {
				return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir index", Err: err}
			}
			it := items[0]
			if it.Location.Type != disk.InodeItemKey {
				return false, syscall.EXDEV
			}
			out = append(out, rmStep{parent: dir, name: string(it.Name), ino: it.Location.ObjectID,
				dir: it.Type.Base() == disk.FtDir})
			size += 2 * uint64(len(it.Name))
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	if size != din.item.Size {
		k := disk.Key{ObjectID: dir, Type: disk.InodeItemKey}
		return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "directory size does not match its entries"}
	}
	for _, s := range out {
		de, err := c.dirEntry(dir, s.name)
		if err != nil {
			return nil, err
		}
		if de == nil || de.Location.ObjectID != s.ino {
			k := disk.Key{ObjectID: dir, Type: disk.DirItemKey, Offset: disk.NameHash([]byte(s.name))}
			return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir index entry without its dir item"}
		}
	}
	return out, nil
}

// removeStep removes one planned name, as Remove does.
func (c *wctx) removeStep(s rmStep) error {
	parent, err := c.inode(s.parent)
	if err != nil {
		return err
	}
	in, ref, err := c.victim(parent, s.name)
	if err != nil {
		return err
	}
	now := c.now()
	if err := c.unlink(parent, in, s.name, ref, now); err != nil {
		return err
	}
	c.touch(parent, now, true)
	return c.putInode(parent)
}
