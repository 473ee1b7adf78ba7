package btrfs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/ctree"
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

// RemoveAll removes name and everything under it, like os.RemoveAll, and
// as `rm -r` run as root removes it on Linux: subvolumes and snapshots
// met (name itself too) go with everything in them, as rm -r empties
// them and the kernel's rmdir then deletes them (DeleteSubvolume's
// deletion), and a snapshot's placeholder of a subvolume nested in its
// source goes as rmdir takes it. A missing name (or parent) is no error;
// "." is EINVAL. As on Linux, the default subvolume is EPERM, and a
// read-only subvolume with entries is EROFS (rm -r fails on its
// contents; an empty one is deleted).
//
// Unlike rm -r, which removes what it can before such an error, RemoveAll
// is one change and checks everything before the first removal, so an
// expected error (those, what checkRemovable refuses, corruption met on
// the walk, a subvolume tree this package does not drop) removes
// nothing. It walks the running transaction's directories (their
// DIR_INDEX items), so it sees uncommitted entries. A subvolume to delete
// that was changed in the running transaction is committed first, as
// DeleteSubvolume does.
func (fsys *FS) RemoveAll(name string) error {
	return fsys.retryTreeChanged(func() error { return fsys.removeAll(name) })
}

func (fsys *FS) removeAll(name string) error {
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
		steps, err := c.planRemoveAll(parent, base, de)
		if err != nil {
			return false, err
		}
		return true, c.removeAllSteps(parent.tr, steps)
	})
}

// rmKind is what RemoveAll does with a name (rmStep).
type rmKind uint8

const (
	rmInode  rmKind = iota // a name of an inode: unlinked (removeStep)
	rmLink                 // a subvolume linked here: dropped, its link removed
	rmNested               // a subvolume linked in one that is dropped: dropped, its refs removed
	rmHolder               // a snapshot's placeholder: its entry removed
)

// rmStep is one name RemoveAll meets: name in directory parent of tree
// tr.
type rmStep struct {
	tr     *ctree.Tree
	parent disk.ObjectID
	name   string
	ino    disk.ObjectID // the inode, or the subvolume's id
	index  uint64        // its DIR_INDEX (0 for name itself)
	kind   rmKind
	dir    bool
	done   bool // a directory (or subvolume) whose entries are planned
	// dropped is set for a name inside a subvolume that is dropped: it
	// is checked as rm -r would meet it, and goes with the tree.
	dropped bool
	link    *subvolLink // rmLink, rmNested
	drop    *subvolDrop // rmLink, rmNested
}

// planRemoveAll lists the names under (and including) base in parent,
// children before their directory, and checks that all can go, also
// inside the subvolumes to delete (what rm -r would meet emptying them).
// It walks with an explicit stack, so a deep tree cannot exhaust the
// goroutine stack, and refuses a directory met twice (a loop in a
// damaged tree). Then it plans the drop of every subvolume met.
func (c *wctx) planRemoveAll(parent *winode, base string, de *disk.DirItem) ([]rmStep, error) {
	if err := notPinned(parent); err != nil {
		return nil, err
	}
	top := c.tr
	first := rmStep{tr: top, parent: parent.ino, name: base, ino: de.Location.ObjectID, dir: de.Type.Base() == disk.FtDir}
	switch de.Location.Type {
	case disk.InodeItemKey:
	case disk.RootItemKey:
		if err := c.checkDirSize(parent, base); err != nil {
			return nil, err
		}
		if err := c.subvolStep(parent, &first, de); err != nil {
			return nil, err
		}
		if first.kind == rmHolder {
			index, err := c.placeholderIndex(parent, base, de)
			if err != nil {
				return nil, err
			}
			first.index = index
		}
	default:
		return nil, disk.Corruptf("tree %d: directory entry %q points at key type %d", top.Owner(), de.Name, de.Location.Type)
	}
	var steps []rmStep
	drops := map[dirKey]*ctree.Tree{} // non-directories losing a name
	seen := map[dirKey]bool{{top.Owner(), c.rootDir}: true, {top.Owner(), disk.FirstFreeObjectID}: true}
	links := map[disk.ObjectID]int{} // subvolumes deleted: the links met in each
	stack := []rmStep{first}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s.kind == rmNested && !s.done {
			links[s.tr.Owner()]++
		}
		if s.done || s.kind == rmHolder || (s.kind == rmInode && !s.dir) {
			if s.kind == rmInode && !s.dir {
				drops[dirKey{s.tr.Owner(), s.ino}] = s.tr
			}
			if !s.dropped || s.kind == rmNested {
				steps = append(steps, s)
			}
			continue
		}
		tr, dir := s.tr, s.ino
		if s.kind != rmInode {
			var err error
			if tr, err = c.t.Tree(s.ino); err != nil {
				return nil, err
			}
			dir = disk.FirstFreeObjectID
		}
		k := dirKey{tr.Owner(), dir}
		if seen[k] {
			key := disk.Key{ObjectID: dir, Type: disk.InodeItemKey}
			return nil, &disk.CorruptError{Tree: tr.Owner(), Key: &key, What: "directory reached twice (loop in the tree)"}
		}
		seen[k] = true
		s.done = true
		stack = append(stack, s)
		c.tr = tr
		children, err := c.dirChildren(dir, s.dropped || s.kind != rmInode)
		if err != nil {
			return nil, err
		}
		if s.kind != rmInode {
			if len(children) > 0 {
				ri, err := c.t.RootItem(s.ino)
				if err != nil {
					return nil, err
				}
				if ri.Flags&disk.RootSubvolReadonly != 0 {
					return nil, syscall.EROFS // rm -r cannot empty it
				}
			}
			if _, ok := links[s.ino]; !ok {
				links[s.ino] = 0 // counted as its links are met
			}
		}
		stack = append(stack, children...)
	}
	for k, tr := range drops {
		c.tr = tr
		in, err := c.inode(k.ino)
		if err != nil {
			return nil, err
		}
		if in.item.IsDir() {
			key := disk.Key{ObjectID: k.ino, Type: disk.InodeItemKey}
			return nil, &disk.CorruptError{Tree: tr.Owner(), Key: &key, What: "directory entry of a directory says it is not one"}
		}
		if err := c.checkRemovable(in); err != nil {
			return nil, err
		}
	}
	// Every subvolume linked in one that is deleted must be one the walk
	// met, so that none is left without a parent.
	for id, n := range links {
		refs, err := c.nestedLinks(id)
		if err != nil {
			return nil, err
		}
		if refs != n {
			key := disk.Key{ObjectID: id, Type: disk.RootRefKey}
			return nil, &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &key,
				What: fmt.Sprintf("subvolume holds %d subvolumes, its directories link %d", refs, n)}
		}
	}
	c.tr = top
	for i := range steps {
		if s := &steps[i]; s.kind == rmLink || s.kind == rmNested {
			var err error
			if s.drop, err = c.planSubvolDrop(s.ino); err != nil {
				return nil, err
			}
		}
	}
	return steps, nil
}

// subvolStep makes s, the entry de in directory parent (c.tr is
// parent's tree), a step of a subvolume: rmLink (rmNested inside a
// subvolume that is dropped) when a ROOT_REF backs the entry, else
// rmHolder. The default subvolume is EPERM, as the kernel's rmdir says.
func (c *wctx) subvolStep(parent *winode, s *rmStep, de *disk.DirItem) error {
	l, err := c.linkOf(parent, s.name, de)
	if err != nil {
		return err
	}
	if l == nil {
		s.kind = rmHolder
		return nil
	}
	if s.index != 0 && l.ref.Sequence != s.index {
		key := disk.Key{ObjectID: parent.tr.Owner(), Type: disk.RootRefKey, Offset: uint64(l.id)}
		return &disk.CorruptError{Tree: disk.RootTreeObjectID, Key: &key, What: fmt.Sprintf("root ref sequence %d, the entry's dir index %d", l.ref.Sequence, s.index)}
	}
	if err := c.checkNotDefault(l.id); err != nil {
		return syscall.EPERM
	}
	s.kind, s.link, s.dir = rmLink, l, true
	if s.dropped {
		s.kind = rmNested
	}
	return nil
}

// removeAllSteps carries out a plan of planRemoveAll; names in tree top
// (where the walk began) go, the subvolumes are dropped. The trees go
// first: their plans counted the references their blocks hold, which
// the edits of top (or a drop of another tree sharing blocks with one)
// change. So each plan that shares blocks is made again when its turn
// comes, after the drops before it; the first is still true.
func (c *wctx) removeAllSteps(top *ctree.Tree, steps []rmStep) error {
	c.tr = top
	dropped := 0
	for _, s := range steps {
		if s.drop == nil {
			continue
		}
		if dropped > 0 && s.drop.plan.Shared() {
			s.drop.plan = nil
		}
		if err := c.dropSubvolTree(s.drop); err != nil {
			return err
		}
		dropped++
		if s.kind == rmNested {
			if err := c.dropSubvolRefs(s.tr.Owner(), s.ino); err != nil {
				return err
			}
		}
	}
	for _, s := range steps {
		if s.kind == rmNested {
			continue
		}
		parent, err := c.inode(s.parent)
		if err != nil {
			return err
		}
		switch s.kind {
		case rmInode:
			err = c.removeStep(parent, s)
		case rmLink:
			err = c.dropSubvolName(parent, s.name, s.link)
		case rmHolder:
			err = c.dropPlaceholder(parent, s.name, s.index)
		}
		if err != nil {
			return err
		}
		if s.kind != rmInode {
			c.touch(parent, c.now(), true)
			if err := c.putInode(parent); err != nil {
				return err
			}
		}
	}
	return nil
}

// dirChildren returns the entries of directory dir (of tree c.tr) from
// its DIR_INDEX items, as steps to plan, dropped when dir is in a
// subvolume that is deleted. It checks what the removals will rely on:
// each entry has its DIR_ITEM, the names add up to the directory's size,
// a subvolume's entry has its ROOT_REF (else it is a placeholder).
func (c *wctx) dirChildren(dir disk.ObjectID, dropped bool) ([]rmStep, error) {
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
			if t := it.Location.Type; t != disk.InodeItemKey && t != disk.RootItemKey {
				return false, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: fmt.Sprintf("dir index names key type %d", t)}
			}
			s := rmStep{tr: c.tr, parent: dir, name: string(it.Name), ino: it.Location.ObjectID, index: k.Offset,
				dir: it.Type.Base() == disk.FtDir, dropped: dropped}
			if it.Location.Type == disk.RootItemKey {
				s.kind = rmLink // for now: subvolStep decides
			}
			out = append(out, s)
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
	for i := range out {
		s := &out[i]
		de, err := c.dirEntry(dir, s.name)
		if err != nil {
			return nil, err
		}
		if de == nil || de.Location.ObjectID != s.ino || (de.Location.Type == disk.RootItemKey) != (s.kind == rmLink) {
			k := disk.Key{ObjectID: dir, Type: disk.DirItemKey, Offset: disk.NameHash([]byte(s.name))}
			return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir index entry without its dir item"}
		}
		if s.kind == rmLink {
			if err := c.subvolStep(din, s, de); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// removeStep removes one planned name of an inode, as Remove does.
func (c *wctx) removeStep(parent *winode, s rmStep) error {
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
