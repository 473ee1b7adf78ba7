package txn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// A filesystem with the v1 space cache keeps, per block group, a cache
// file in the root tree: a header item (FREE_SPACE, 0, group start) that
// names an inode, and the inode (INODE_ITEM, EXTENT_DATA items pointing
// at preallocated data extents referenced from the root tree). This
// package does not keep those files current. Instead the first commit
// after a writable open does what the kernel does when such a filesystem
// is mounted with space_cache=v2 (docs/design/0015-v1-space-cache.md):
// it deletes every cache file and its data extents, builds the free-space
// tree from the extent tree, and sets compat_ro FREE_SPACE_TREE and
// FREE_SPACE_TREE_VALID with cache_generation 0. Nothing is written
// before that commit, so an open that never commits, or a commit that
// fails, leaves the v1 filesystem as it was.

// spaceCacheV1 is what the conversion removes, gathered at open from the
// committed root tree (nothing else changes those items before the
// conversion, which is the first commit).
type spaceCacheV1 struct {
	// keys are the root tree items to delete: headers, the cache
	// inodes' INODE_ITEM and EXTENT_DATA items, orphan items naming
	// them.
	keys []disk.Key
	// refs are the data extent references of the cache inodes' file
	// extents, dropped so the extents are freed.
	refs []v1Ref
	// noTree: the cache files go but no free-space tree is made (a
	// block group at logical 0, see prepareV1Conversion).
	noTree bool
}

// v1Ref is one reference of a cache inode to its data extent.
type v1Ref struct {
	bytenr   disk.LogicalAddr
	numBytes uint64
	ino      disk.ObjectID
	offset   uint64 // key offset minus extent offset: the EXTENT_DATA_REF offset
}

// freeSpaceHeaderSize is the size of struct btrfs_free_space_header:
// location key, generation, num_entries, num_bitmaps.
const freeSpaceHeaderSize = disk.KeySize + 3*8

// needsV1Conversion reports whether sb describes a filesystem using the v1
// space cache: no free-space tree and a cache generation set by the last
// kernel that wrote it. (Without a cache generation the kernel treats any
// cache files as invalid and rebuilds them, so they are left alone.)
func needsV1Conversion(sb *disk.Superblock) bool {
	return sb.CompatROFlags&disk.CompatROFreeSpaceTree == 0 && sb.CacheGeneration != 0
}

// prepareV1Conversion checks, at open, that a v1 filesystem can be
// converted, and gathers what the conversion removes.
func (fs *FS) prepareV1Conversion() (*spaceCacheV1, error) {
	if _, _, err := fs.rootItem(disk.FreeSpaceTreeObjectID); err == nil {
		// A tree left by an interrupted conversion that never set the
		// feature bit: the kernel ignores it; we refuse rather than
		// guess what it holds.
		return nil, fmt.Errorf("%w: a free space tree without compat_ro FREE_SPACE_TREE", ErrUnsupported)
	}
	// Old mkfs.btrfs (as in btrfs-progs' fsck test images 001 to 020)
	// put the first SYSTEM chunk at logical 0, mapped at physical 0. No
	// free-space tree made for such a group passes btrfs check (6.2 and
	// 6.19): its loader leaves [0, 64 KiB) out whatever the tree says,
	// and its verifier wants that range free, so it reports "there is no
	// free space entry for 0-65536" after the kernel's own space_cache=v2
	// conversion, after btrfstune 6.19's --convert-to-free-space-tree and
	// after ours alike. Such a filesystem is not converted but left
	// as the kernel leaves it when mounted with clear_cache,nospace_cache:
	// the first commit removes the cache files as the conversion does,
	// makes no free-space tree, and cache_generation is 0 (at every
	// commit of ours); the kernel then mounts it without a space cache,
	// and btrfs check has no cache to verify.
	v, err := fs.loadSpaceCacheV1()
	if err != nil {
		return nil, err
	}
	for c := range fs.chunks.All() {
		if c.Logical() < disk.SuperblockOffset {
			v.noTree = true
		}
	}
	return v, nil
}

// loadSpaceCacheV1 gathers the v1 cache items of the committed root tree.
// A header that does not name an inode of the root tree, or a cache inode
// with items this package does not know how to remove, is refused before
// anything is written.
func (fs *FS) loadSpaceCacheV1() (*spaceCacheV1, error) {
	v := &spaceCacheV1{}
	rt := fs.rootTreeRoot()
	c := ctree.NewCursor(fs, rt)
	var inodes []disk.ObjectID
	ok, err := c.Seek(disk.Key{ObjectID: disk.FreeSpaceObjectID})
	for ; err == nil && ok && c.Key().ObjectID == disk.FreeSpaceObjectID; ok, err = c.Next() {
		k := c.Key()
		corrupt := func(what string) error {
			return &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k,
				What: "v1 space cache header", Err: errors.New(what)}
		}
		if k.Type != 0 {
			return nil, corrupt(fmt.Sprintf("unexpected item type %d", k.Type))
		}
		d := c.Data()
		if len(d) < freeSpaceHeaderSize {
			return nil, corrupt(fmt.Sprintf("%d bytes, want %d", len(d), freeSpaceHeaderSize))
		}
		var loc disk.Key
		if err := loc.Decode(d); err != nil {
			return nil, corrupt(err.Error())
		}
		if loc.Type != disk.InodeItemKey || loc.ObjectID < disk.FirstFreeObjectID || loc.ObjectID > disk.LastFreeObjectID {
			return nil, corrupt(fmt.Sprintf("location %v is not a cache inode", loc))
		}
		v.keys = append(v.keys, k)
		if !slices.Contains(inodes, loc.ObjectID) { // two headers naming one inode: remove it once
			inodes = append(inodes, loc.ObjectID)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("root tree: v1 space cache headers: %w", err)
	}
	for _, ino := range inodes {
		if err := v.loadInode(fs, rt, ino); err != nil {
			return nil, fmt.Errorf("root tree: v1 space cache inode %d: %w", ino, err)
		}
	}
	// An interrupted removal by the kernel leaves orphan items naming
	// cache inodes; they go with the inode.
	c = ctree.NewCursor(fs, rt)
	for _, ino := range inodes {
		ok, err := c.Seek(disk.Key{ObjectID: disk.OrphanObjectID, Type: disk.OrphanItemKey, Offset: uint64(ino)})
		if err != nil {
			return nil, fmt.Errorf("root tree: orphan items: %w", err)
		}
		if ok && c.Key() == (disk.Key{ObjectID: disk.OrphanObjectID, Type: disk.OrphanItemKey, Offset: uint64(ino)}) {
			v.keys = append(v.keys, c.Key())
		}
	}
	return v, nil
}

// loadInode gathers the items of cache inode ino: its INODE_ITEM and its
// file extents. Any other item (a name, an xattr, a ROOT_ITEM) means ino
// is not a cache file as the kernel makes them.
func (v *spaceCacheV1) loadInode(fs *FS, rt ctree.Root, ino disk.ObjectID) error {
	c := ctree.NewCursor(fs, rt)
	ok, err := c.Seek(disk.Key{ObjectID: ino})
	for ; err == nil && ok && c.Key().ObjectID == ino; ok, err = c.Next() {
		k := c.Key()
		switch k.Type {
		case disk.InodeItemKey:
		case disk.ExtentDataKey:
			var fe disk.FileExtentItem
			if err := fe.Decode(c.Data()); err != nil {
				return &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k,
					What: "file extent", Err: err}
			}
			if fe.Type != disk.FileExtentInline && fe.DiskBytenr != 0 {
				if fe.Offset > k.Offset {
					return &disk.CorruptError{Logical: c.Leaf().Bytenr(), Tree: disk.RootTreeObjectID, Key: &k,
						What: "file extent", Err: fmt.Errorf("extent offset %d past the file offset", fe.Offset)}
				}
				v.refs = append(v.refs, v1Ref{bytenr: fe.DiskBytenr, numBytes: fe.DiskNumBytes, ino: ino,
					offset: k.Offset - fe.Offset})
			}
		default:
			return fmt.Errorf("%w: item %v in a v1 space cache inode", ErrUnsupported, k)
		}
		v.keys = append(v.keys, k)
	}
	return err
}

// convertSpaceCacheV1 is the first step of the first commit on a v1
// filesystem: it removes the cache files and creates the free-space tree
// with a FREE_SPACE_INFO per block group; settleFST then fills every
// group in, and newSuper sets the feature bits. With noTree it stops
// after removing the cache files.
func (t *Txn) convertSpaceCacheV1() error {
	v := t.fs.v1
	if v == nil || t.fstCreated || t.v1Cleared {
		return nil
	}
	if err := t.loadAllSpace(); err != nil {
		return err
	}
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return err
	}
	for _, k := range v.keys {
		if _, err := rt.DeleteItem(t.tx, k); err != nil {
			return fmt.Errorf("delete %v: %w", k, err)
		}
	}
	for _, r := range v.refs {
		if err := t.DropDataRef(r.bytenr, r.numBytes, disk.RootTreeObjectID, r.ino, r.offset, 1); err != nil {
			return fmt.Errorf("cache inode %d extent %d: %w", r.ino, r.bytenr, err)
		}
	}
	if v.noTree {
		t.v1Cleared = true
		return nil
	}
	// Chunks this transaction made so far get their items now, without
	// a FREE_SPACE_INFO; from here on insertChunk adds one for every new
	// chunk, and the groups below get theirs here: each group once.
	if err := t.settleChunks(); err != nil {
		return fmt.Errorf("new chunks: %w", err)
	}
	groups := slices.Clone(t.fs.space.Groups())
	t.fstCreated = true
	ft, err := t.createFreeSpaceTree()
	if err != nil {
		return err
	}
	var info disk.FreeSpaceInfo
	buf := make([]byte, info.Size())
	info.Encode(buf)
	for _, g := range groups {
		if err := ft.InsertItem(t.tx, infoKey(g), buf); err != nil {
			return fmt.Errorf("free space info of block group %d: %w", g.Start, err)
		}
	}
	t.mu.Lock()
	for _, g := range groups {
		t.touch(g.Start)
	}
	t.mu.Unlock()
	return nil
}

// createFreeSpaceTree makes the free-space tree, empty, with a ROOT_ITEM
// as the kernel's conversion leaves it: one reference, no uuid, no times.
func (t *Txn) createFreeSpaceTree() (*ctree.Tree, error) {
	id := disk.FreeSpaceTreeObjectID
	rt, err := t.Tree(disk.RootTreeObjectID)
	if err != nil {
		return nil, err
	}
	if _, _, err := t.lookupRootItem(rt, id); err == nil {
		return nil, fmt.Errorf("%w: a free space tree without compat_ro FREE_SPACE_TREE", ErrUnsupported)
	}
	tr, err := ctree.Create(t.tx, id, t.fs.treeOptions(id))
	if err != nil {
		return nil, err
	}
	r := tr.Root()
	item := disk.RootItem{Bytenr: r.Addr, Level: uint8(r.Level), Generation: r.Generation, GenerationV2: r.Generation,
		Refs: 1, BytesUsed: uint64(t.fs.sb.NodeSize)}
	key := disk.Key{ObjectID: id, Type: disk.RootItemKey}
	b := make([]byte, item.Size())
	item.Encode(b)
	if err := rt.InsertItem(t.tx, key, b); err != nil {
		return nil, fmt.Errorf("free space tree root item: %w", err)
	}
	t.trees[id] = tr
	t.rootKeys[id] = key
	t.setUsedLocked(id, tr, item.BytesUsed)
	return tr, nil
}

// keepsFST reports whether this transaction maintains a free-space tree:
// the filesystem has one, or this transaction's conversion made it.
func (t *Txn) keepsFST() bool { return t.fs.hasFST || t.fstCreated }
