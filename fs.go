package btrfs

import (
	"errors"
	"fmt"

	"sync"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// FS is an open btrfs filesystem. Its io/fs methods see the top-level
// subvolume (id 5); Subvolume gives a view rooted at another one.
type FS struct {
	*volume
	top  *subvol // the view's root subvolume; immutable
	view bool    // a view made by Subvolume: Close leaves the devices open
	w    *writer // the write side of OpenWritable; nil for read-only opens
	// rv, when set, is the published view this FS reads (FS.reader): a
	// read's own FS, never the one the caller holds.
	rv *readView
}

// volume is the state every view of one filesystem shares.
type volume struct {
	sb     *disk.Superblock // immutable after Open
	br     *blockReader     // the committed tree blocks
	blocks ctree.Reader     // what reads use: br, or a running transaction's view of it
	data   logicalReader
	chunks *chunk.Map // complete after Open

	devPaths map[disk.DevID]string // where each present device was opened from
	opts     Options

	rootTree ctree.Root // root of tree 1
	csumRoot ctree.Root // root of tree 7 (Addr 0 if absent)

	closers []closerFunc

	mu      sync.Mutex
	subvols map[disk.ObjectID]*subvol // protected by mu

	ext *extentCache

	// warnings are what a read-only open wants the user to know (the
	// log it could not replay, logreplay_open.go); immutable.
	warnings []string
}

// subvol is one loaded subvolume tree.
type subvol struct {
	id    disk.ObjectID
	root  ctree.Root
	dirID disk.ObjectID // inode number of its root directory
	item  disk.RootItem
}

// SectorSize is the filesystem's sector size.
func (fsys *FS) SectorSize() uint32 {
	fsys, done := fsys.reader() // a commit replaces fsys.sb (with the same sector size)
	defer done()
	return fsys.sb.SectorSize
}

// Close releases the devices. Files opened from fsys must not be used after.
func (fsys *FS) Close() error {
	if fsys.view {
		return nil
	}
	var errs []error
	for _, c := range fsys.closers {
		errs = append(errs, c.Close())
	}
	fsys.closers = nil
	return errors.Join(errs...)
}

// rlock holds the live read side steady for one read; runlock releases
// it. On a writable FS a change swaps the roots reads start from and
// edits the running transaction's blocks in place, and a commit moves the
// read side to the new roots, so a read of the live side holds the
// writer's lock shared. Most public reads read a published view instead
// (FS.reader, read_view.go) and never wait; the few that need the running
// transaction's own bookkeeping (FileExtents, the space reports) still
// take this lock. Read-only opens never change: no lock. Such methods
// take it once at their start and call only unlocked helpers (a second
// RLock in one goroutine can deadlock behind a waiting writer).
func (fsys *FS) rlock() {
	if fsys.w != nil {
		fsys.w.mu.RLock()
	}
}

// runlock ends what rlock began.
func (fsys *FS) runlock() {
	if fsys.w != nil {
		fsys.w.mu.RUnlock()
	}
}

// version counts the changes and commits of a writable FS (0 for
// read-only opens): open files reload their inode when it moved.
func (fsys *FS) version() uint64 {
	if fsys.w == nil {
		return 0
	}
	if fsys.rv != nil {
		return fsys.rv.version
	}
	return fsys.w.version.Load()
}

// fresh returns in with its subvolume at the current root: an inode loaded
// before a change or commit may carry a stale root. Read lock held.
func (fsys *FS) fresh(in *inode) (*inode, error) {
	if fsys.w == nil {
		return in, nil
	}
	sv, err := fsys.subvolume(in.sv.id)
	if err != nil || sv == in.sv {
		return in, err
	}
	c := *in
	c.sv = sv
	return &c, nil
}

// cursor returns a cursor over tree root.
func (fsys *FS) cursor(root ctree.Root) *ctree.Cursor { return ctree.NewCursor(fsys.blocks, root) }

// lookupItem finds the item with exactly key k in tree root.
func (fsys *FS) lookupItem(root ctree.Root, k disk.Key) ([]byte, bool, error) {
	c := fsys.cursor(root)
	ok, err := c.Seek(k)
	if err != nil || !ok || c.Key() != k {
		return nil, false, err
	}
	return c.Data(), true, nil
}

// subvolume loads (once) the tree of subvolume or tree id.
func (fsys *FS) subvolume(id disk.ObjectID) (*subvol, error) {
	fsys.mu.Lock()
	sv := fsys.subvols[id]
	fsys.mu.Unlock()
	if sv != nil {
		return sv, nil
	}
	item, err := fsys.rootItem(id)
	if err != nil {
		return nil, err
	}
	sv = &subvol{id: id, item: *item, dirID: item.RootDirID,
		root: ctree.Root{Addr: item.Bytenr, Level: int(item.Level), Generation: item.Generation, Owner: id}}
	if sv.dirID == 0 {
		sv.dirID = disk.FirstFreeObjectID
	}
	fsys.mu.Lock()
	if old := fsys.subvols[id]; old != nil {
		sv = old
	} else {
		fsys.subvols[id] = sv
	}
	fsys.mu.Unlock()
	return sv, nil
}

// rootItem returns the ROOT_ITEM of tree id (any key offset: snapshots key
// theirs by creation transid).
func (fsys *FS) rootItem(id disk.ObjectID) (*disk.RootItem, error) {
	c := fsys.cursor(fsys.rootTree)
	ok, err := c.Seek(disk.Key{ObjectID: id, Type: disk.RootItemKey})
	if err != nil {
		return nil, err
	}
	if !ok || c.Key().ObjectID != id || c.Key().Type != disk.RootItemKey {
		return nil, fmt.Errorf("tree %s: %w", id.TreeName(), errNoRoot)
	}
	var ri disk.RootItem
	if err := ri.Decode(c.Data()); err != nil {
		k := c.Key()
		return nil, &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k, What: "root item", Err: err}
	}
	return &ri, nil
}

var errNoRoot = errors.New("no root item")
