package btrfs

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// winode is an inode loaded inside the running transaction.
type winode struct {
	ino  disk.ObjectID
	item disk.InodeItem
	tr   *ctree.Tree // the subvolume tree holding it
}

// inode reads the INODE_ITEM of ino from the transaction's tree.
func (c *wctx) inode(ino disk.ObjectID) (*winode, error) {
	in, err := c.findInode(ino)
	if err == nil && in == nil {
		k := disk.Key{ObjectID: ino, Type: disk.InodeItemKey}
		return nil, &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "inode item missing"}
	}
	return in, err
}

// findInode is inode for an inode that may be gone (nil, nil): the one an
// open File names after it was removed.
func (c *wctx) findInode(ino disk.ObjectID) (*winode, error) {
	it, err := findInodeItem(c.items(), ino)
	if err != nil || it == nil {
		return nil, err
	}
	return &winode{ino: ino, tr: c.tr, item: *it}, nil
}

// putInode rewrites the INODE_ITEM of in (its size never changes).
func (c *wctx) putInode(in *winode) error {
	k := disk.Key{ObjectID: in.ino, Type: disk.InodeItemKey}
	return c.tr.UpdateItem(c.tx, k, func(data []byte) error {
		if len(data) < disk.InodeItemSize {
			return &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "inode item too short"}
		}
		in.item.Encode(data)
		return nil
	})
}

// dirEntry finds name in directory dir: the DIR_ITEM entry, or nil.
func (c *wctx) dirEntry(dir disk.ObjectID, name string) (*disk.DirItem, error) {
	return findDirItem(c.items(), dir, name)
}

// resolve walks the components of an io/fs path from the root directory
// of the top-level subvolume. Symlinks and ".." in the middle are followed
// as the read side and Linux follow them (walkDirs); a symlink as the last
// component is returned itself. Crossing into a subvolume switches the
// change to that subvolume's tree (enter), so the operation that follows
// works there; a subvolume that may not be written (sharedTreeErr) is
// refused then, before anything changes.
func (c *wctx) resolve(name string) (*winode, error) {
	in, err := c.lookupPath(name)
	if err != nil {
		return nil, err
	}
	if err := c.sharedTreeErr(c.tr.Owner()); err != nil {
		return nil, err
	}
	return in, nil
}

// lookupPath is resolve for a change that only reads what it finds (the
// directory a new inode inherits from): a subvolume that may not be
// written is no obstacle.
func (c *wctx) lookupPath(name string) (*winode, error) {
	c.tr = c.top
	if name == "." {
		return c.inode(c.rootDir)
	}
	comps := splitPath(name)
	dir, err := c.walkDirs(comps[:len(comps)-1])
	if err != nil {
		return nil, err
	}
	return c.child(dir, comps[len(comps)-1])
}

// wdir is a directory met while walking a path: its tree and inode.
type wdir struct {
	tr  *ctree.Tree
	ino disk.ObjectID
}

// walkDirs resolves comps from the root as directories, following
// symlinks (absolute targets from the view's root, at most maxSymlinks)
// and "..", and returns the last directory's inode number with c.tr at
// its tree. Directories met on the way are remembered for the transaction
// (txCache.dirs), so deep paths cost one lookup for the last component.
func (c *wctx) walkDirs(comps []string) (disk.ObjectID, error) {
	if c.pins == nil {
		return c.walkDirsLive(comps, true)
	}
	key := strings.Join(comps, "/")
	if c.recordPins {
		ino, err := c.walkDirsLive(comps, true)
		if err == nil {
			c.pins[key] = wdir{c.tr, ino}
		}
		return ino, err
	}
	// Inside a parallel run: the path must have been resolved before
	// the run, and must still lead where it led then. A directory
	// renamed beside this change (or a name removed earlier in its
	// chain) may have changed it, or may be half moved: the change then
	// runs alone after the run, where it resolves the path afresh. The
	// walk does not fill the cache: it may read a name another change
	// of the run is removing, after that change dropped it from the
	// cache.
	pin, ok := c.pins[key]
	if !ok {
		return 0, errRunAlone
	}
	ino, err := c.walkDirsLive(comps, false)
	if err != nil || ino != pin.ino || c.tr.Owner() != pin.tr.Owner() {
		return 0, errRunAlone
	}
	return ino, nil
}

// walkDirsLive is walkDirs through the trees as they are now; fill says
// whether the directories met go into the cache.
func (c *wctx) walkDirsLive(comps []string, fill bool) (disk.ObjectID, error) {
	stack := []wdir{{c.top, c.rootDir}}
	todo := slices.Clone(comps)
	links := 0
	for len(todo) > 0 {
		comp := todo[0]
		todo = todo[1:]
		cur := stack[len(stack)-1]
		c.tr = cur.tr
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		key := dirEntKey{dirKey{cur.tr.Owner(), cur.ino}, comp}
		c.cache.mu.Lock()
		d, ok := c.cache.dirs[key]
		c.cache.mu.Unlock()
		if ok {
			if d.tree != cur.tr.Owner() {
				if err := c.enterTree(d.tree); err != nil {
					return 0, err
				}
			}
			stack = append(stack, wdir{c.tr, d.ino})
			continue
		}
		in, err := c.child(cur.ino, comp)
		if err != nil {
			return 0, err
		}
		if in.item.IsSymlink() {
			if links++; links > maxSymlinks {
				return 0, errLoop
			}
			target, err := c.readSymlink(in)
			if err != nil {
				return 0, err
			}
			if strings.HasPrefix(target, "/") {
				stack = stack[:1]
			}
			todo = append(splitPath(target), todo...)
			continue
		}
		if !in.item.IsDir() {
			return 0, syscall.ENOTDIR
		}
		if fill {
			c.cache.mu.Lock()
			c.cache.dirs[key] = dirKey{in.tr.Owner(), in.ino}
			c.cache.mu.Unlock()
		}
		stack = append(stack, wdir{in.tr, in.ino})
	}
	last := stack[len(stack)-1]
	c.tr = last.tr
	return last.ino, nil
}

// readSymlink reads a symlink's target as the transaction holds it.
func (c *wctx) readSymlink(in *winode) (string, error) {
	if in.item.Size > 64<<10 {
		return "", syscall.ENAMETOOLONG
	}
	buf := make([]byte, in.item.Size)
	if err := c.readFile(in, 0, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}

// child loads the inode called comp in directory dir of the current tree.
func (c *wctx) child(dir disk.ObjectID, comp string) (*winode, error) {
	de, err := c.dirEntry(dir, comp)
	if err != nil {
		return nil, err
	}
	if de == nil {
		return nil, syscall.ENOENT
	}
	return c.enter(de)
}

// enter returns the inode a directory entry names. An entry naming a
// subvolume (a ROOT_ITEM location) switches the change to that
// subvolume's tree and returns its root directory.
func (c *wctx) enter(de *disk.DirItem) (*winode, error) {
	switch de.Location.Type {
	case disk.InodeItemKey:
		return c.inode(de.Location.ObjectID)
	case disk.RootItemKey:
		if err := c.enterTree(de.Location.ObjectID); err != nil {
			return nil, err
		}
		return c.inode(disk.FirstFreeObjectID)
	}
	return nil, disk.Corruptf("tree %d: directory entry %q points at key type %d", c.tr.Owner(), de.Name, de.Location.Type)
}

// enterTree makes subvolume id the current tree. A read-only subvolume
// is EROFS: every operation that reaches into one would change it.
func (c *wctx) enterTree(id disk.ObjectID) error {
	ri, err := c.t.RootItem(id)
	if err != nil {
		return err
	}
	if ri.Flags&disk.RootSubvolReadonly != 0 && !c.readOnly {
		return syscall.EROFS
	}
	tr, err := c.t.Tree(id)
	if err != nil {
		return err
	}
	c.tr = tr
	return nil
}

// splitParent resolves the directory holding the last component of name
// and checks the component's length. name must not be ".".
func (c *wctx) splitParent(name string) (*winode, string, error) {
	parent, base, err := c.splitParentAnyLen(name)
	if err == nil && len(base) > disk.NameMax {
		err = syscall.ENAMETOOLONG
	}
	return parent, base, err
}

// splitParentAnyLen is splitParent without the length check of the last
// component, for callers that must report other errors first (rename
// looks its source up before the new name, as Linux does).
func (c *wctx) splitParentAnyLen(name string) (*winode, string, error) {
	parent, base, err := c.lookupParent(name)
	if err != nil {
		return nil, "", err
	}
	if err := c.sharedTreeErr(c.tr.Owner()); err != nil {
		return nil, "", err
	}
	return parent, base, nil
}

// lookupParent is splitParentAnyLen for a change that only reads the
// parent (the source of a snapshot).
func (c *wctx) lookupParent(name string) (*winode, string, error) {
	if name == "." {
		return nil, "", syscall.EEXIST
	}
	dir, base := ".", name
	if i := lastSlash(name); i >= 0 {
		dir, base = name[:i], name[i+1:]
	}
	// Every component of the parent is followed, symlinks included, as
	// Linux resolves the directory part of a path.
	c.tr = c.top
	ino, err := c.walkDirs(splitPath(dir))
	if err != nil {
		return nil, "", err
	}
	parent, err := c.inode(ino)
	if err != nil {
		return nil, "", err
	}
	return parent, base, nil
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// lastKeyBelow returns the key of the last item before k, if any.
func (c *wctx) lastKeyBelow(k disk.Key) (disk.Key, bool, error) {
	var p ctree.Path
	defer p.Release()
	if _, err := c.tr.Search(c.tx, &p, k, 0, false); err != nil {
		return disk.Key{}, false, err
	}
	ok, err := c.tr.Prev(c.tx, &p)
	if err != nil || !ok {
		return disk.Key{}, false, err
	}
	return p.Key(), true, nil
}

// dirUnder reports whether directory d is directory a or lies below it
// in the current tree, walking up d's parents (a directory has one
// name, so its first INODE_REF names its parent; the tree's root
// directory names itself).
func (c *wctx) dirUnder(d, a disk.ObjectID) (bool, error) {
	for range pathMax {
		if d == a {
			return true, nil
		}
		var parent disk.ObjectID
		found := false
		from := disk.Key{ObjectID: d, Type: disk.InodeRefKey}
		to := disk.Key{ObjectID: d, Type: disk.InodeRefKey, Offset: ^uint64(0)}
		err := c.tr.Range(c.tx, from, to, func(k disk.Key, _ []byte) (bool, error) {
			parent, found = disk.ObjectID(k.Offset), true
			return false, nil
		})
		if err != nil || !found || parent == d {
			return false, err
		}
		d = parent
	}
	return false, &disk.CorruptError{Tree: c.tr.Owner(), What: fmt.Sprintf("directory %d: parents loop", d)}
}

// newIno returns a new inode number for the subvolume: the highest
// objectid in its tree plus one the first time since the FS was opened,
// then one more each call, across commits (a number handed out by a
// change that failed its checks, or by a transaction rolled back, is
// skipped, as the kernel skips numbers).
func (c *wctx) newIno() (disk.ObjectID, error) {
	owner := c.tr.Owner()
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	ino, ok := c.cache.ino[owner]
	if !ok {
		k, found, err := c.lastKeyBelow(disk.Key{ObjectID: disk.LastFreeObjectID})
		if err != nil {
			return 0, err
		}
		ino = disk.FirstFreeObjectID
		if found && k.ObjectID >= ino {
			ino = k.ObjectID + 1
		}
	}
	if ino > disk.LastFreeObjectID-1 {
		return 0, syscall.ENOSPC
	}
	c.cache.ino[owner] = ino + 1
	return ino, nil
}

// nextIndex returns the DIR_INDEX offset for a new entry of dir: the
// highest existing one plus one (from 2: 0 and 1 stand for "." and "..")
// the first time since the FS was opened, then one more each call, as
// the kernel counts in memory.
func (c *wctx) nextIndex(dir disk.ObjectID) (uint64, error) {
	key := dirKey{c.tr.Owner(), dir}
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	next, ok := c.cache.index[key]
	if !ok {
		k, found, err := c.lastKeyBelow(disk.Key{ObjectID: dir, Type: disk.DirIndexKey + 1})
		if err != nil {
			return 0, err
		}
		next = 2
		if found && k.ObjectID == dir && k.Type == disk.DirIndexKey && k.Offset >= 2 {
			next = k.Offset + 1
		}
	}
	c.cache.index[key] = next + 1
	return next, nil
}

// dirKey names a directory: its subvolume and inode number.
type dirKey struct {
	tree disk.ObjectID
	ino  disk.ObjectID
}

// txCache is what a writer remembers for the running transaction, to
// spare tree searches: the next inode number of each subvolume and the
// next DIR_INDEX of each directory used. Each transaction starts it
// empty but for those two counters, which carry over while the FS is
// open (FS.change).
type txCache struct {
	// mu protects the maps for changes that run in parallel
	// (runParallel); it is held across the tree search that fills an
	// entry of ino or index, so each is counted from the tree once.
	// Lock order: mu, then the engine's block locks.
	mu    sync.Mutex
	ino   map[disk.ObjectID]disk.ObjectID
	index map[dirKey]uint64
	// dirs maps a directory and a name in it to the directory that name
	// holds. dropName, which every removal and move of a name goes
	// through, deletes that name's entry.
	dirs map[dirEntKey]dirKey
	// log is what the tree log holds (sync_log.go).
	log logState
	// shared holds, per subvolume tree met, why it may not be written
	// (nil: it may): sharedTreeErr.
	shared map[disk.ObjectID]error
}

// dirEntKey is a name in a directory.
type dirEntKey struct {
	dir  dirKey
	name string
}

func newTxCache() *txCache {
	return &txCache{ino: map[disk.ObjectID]disk.ObjectID{}, index: map[dirKey]uint64{},
		dirs: map[dirEntKey]dirKey{}}
}

// forgetTree drops what the cache counted for the subvolume tree id (its
// next inode number, its directories' DIR_INDEX counters and names, its
// write verdict): a new tree that takes the id of a deleted one counts
// from its own items.
func (c *txCache) forgetTree(id disk.ObjectID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ino, id)
	delete(c.shared, id)
	maps.DeleteFunc(c.index, func(k dirKey, _ uint64) bool { return k.tree == id })
	maps.DeleteFunc(c.dirs, func(k dirEntKey, _ dirKey) bool { return k.dir.tree == id })
}

// addHashed adds entry to the hashed item key (DIR_ITEM or XATTR_ITEM),
// growing the item when names collide.
func (c *wctx) addHashed(k disk.Key, entry disk.DirItem) error {
	buf := make([]byte, entry.Size())
	disk.EncodeDirItems(buf, []disk.DirItem{entry})
	err := c.tr.InsertItem(c.tx, k, buf)
	if !errors.Is(err, ctree.ErrExist) {
		return err
	}
	return c.tr.ExtendItem(c.tx, k, len(buf), func(data []byte) {
		copy(data[len(data)-len(buf):], buf)
	})
}

// removeHashed removes the entry called name from the hashed item key;
// the item goes when it was the last entry.
func (c *wctx) removeHashed(k disk.Key, name []byte) error {
	data, ok, err := c.tr.Lookup(c.tx, k)
	if err != nil {
		return err
	}
	if !ok {
		return &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "hashed item missing"}
	}
	items, err := disk.ParseDirItems(data)
	if err != nil {
		return &disk.CorruptError{Tree: c.tr.Owner(), Key: &k, What: "dir item", Err: err}
	}
	keep := items[:0]
	for _, it := range items {
		if !bytes.Equal(it.Name, name) {
			keep = append(keep, it)
		}
	}
	return c.replaceItem(k, keep)
}

// replaceItem rewrites the hashed item k with entries (none: deleted).
func (c *wctx) replaceItem(k disk.Key, entries []disk.DirItem) error {
	if _, err := c.tr.DeleteItem(c.tx, k); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	buf := make([]byte, disk.DirItemsSize(entries))
	disk.EncodeDirItems(buf, entries)
	return c.tr.InsertItem(c.tx, k, buf)
}

// touch sets ctime (and mtime when both) to now and the inode's transid.
func (c *wctx) touch(in *winode, now time.Time, mtime bool) {
	ts := disk.TimespecOf(now)
	in.item.CTime = ts
	if mtime {
		in.item.MTime = ts
	}
	in.item.TransID = c.gen
	in.item.Sequence++
}

// notPinned refuses a change to an inode whose IMMUTABLE or APPEND flag
// forbids it, as Linux does (EPERM) for unlinking or renaming it, linking
// to it, taking entries out of it (a directory), and changing its mode,
// owner, times or xattrs. SetInodeFlags is the way to clear the flags.
func notPinned(in *winode) error {
	if in.item.Flags&(disk.InodeImmutable|disk.InodeAppend) != 0 {
		return syscall.EPERM
	}
	return nil
}

// canAddEntry refuses new entries in an IMMUTABLE directory (EPERM); an
// APPEND-only directory takes them.
func canAddEntry(dir *winode) error {
	if dir.item.Flags&disk.InodeImmutable != 0 {
		return syscall.EPERM
	}
	return nil
}
