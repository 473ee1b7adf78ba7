package disk

import (
	"errors"
	"fmt"
)

// ItemCheckParams are the filesystem facts item contents are checked
// against. Zero fields switch off the rules that need them.
type ItemCheckParams struct {
	SectorSize uint32     // alignment of extents, csums, dev extents
	NodeSize   uint32     // tree-block extent length, max xattr size
	CsumType   CsumType   // size of data checksums (the zero value is crc32c)
	SuperGen   Generation // generations may not exceed SuperGen+1
	// Tree is the id of the tree the leaf belongs to; CheckLeafItems falls
	// back to the header owner when it is 0.
	Tree ObjectID
}

// itemChecker holds one item being checked.
type itemChecker struct {
	k    Key
	data []byte
	p    ItemCheckParams
}

func (c *itemChecker) fail(format string, args ...any) error {
	k := c.k
	return &CorruptError{Key: &k, What: fmt.Sprintf(format, args...)}
}

// wrap attaches the item key to an error from a decoder.
func (c *itemChecker) wrap(err error) error {
	k := c.k
	var ce *CorruptError
	if errors.As(err, &ce) {
		e := *ce
		e.Key = &k
		return &e
	}
	return &CorruptError{Key: &k, What: "bad item", Err: err}
}

func (c *itemChecker) aligned(v uint64) bool {
	return c.p.SectorSize == 0 || v%uint64(c.p.SectorSize) == 0
}

func (c *itemChecker) genOK(g Generation) bool {
	return c.p.SuperGen == 0 || g <= c.p.SuperGen+1
}

func (c *itemChecker) size(want int) error {
	if len(c.data) != want {
		return c.fail("item size %d, want %d", len(c.data), want)
	}
	return nil
}

// CheckItem applies the kernel tree-checker's rules for one item's key and
// payload (format doc section 9.1), plus the free-space-tree and UUID-tree
// size rules. Types without rules pass. Errors are *CorruptError with Key
// set; the caller adds the block address and tree.
func CheckItem(k Key, data []byte, p ItemCheckParams) error {
	c := &itemChecker{k: k, data: data, p: p}
	switch k.Type {
	case InodeItemKey:
		return c.inodeItem()
	case InodeRefKey:
		return c.inodeRefs()
	case InodeExtrefKey:
		return c.inodeExtrefs()
	case DirItemKey, DirIndexKey, XattrItemKey:
		return c.dirItems()
	case ExtentDataKey:
		return c.fileExtent()
	case ExtentCsumKey:
		return c.csumItem()
	case RootItemKey:
		return c.rootItem()
	case RootRefKey, RootBackrefKey:
		return c.rootRef()
	case ExtentItemKey, MetadataItemKey:
		return c.extentItem()
	case TreeBlockRefKey, SharedBlockRefKey, SharedDataRefKey, ExtentDataRefKey:
		return c.keyedRef()
	case BlockGroupItemKey:
		return c.blockGroup()
	case ChunkItemKey:
		return c.chunk()
	case DevItemKey:
		return c.devItem()
	case DevExtentKey:
		return c.devExtent()
	case FreeSpaceInfoKey, FreeSpaceExtentKey, FreeSpaceBitmapKey:
		return c.freeSpace()
	case UUIDKeySubvol, UUIDKeyReceivedSubvol:
		if len(data)%8 != 0 {
			return c.fail("uuid item size %d not a multiple of 8", len(data))
		}
	}
	return nil
}

// validInodeNumber reports the objectids an inode may have: the subvolume
// range, the root tree's directory 6, and the obsolete free-ino inode.
func validInodeNumber(id ObjectID) bool {
	return (id >= FirstFreeObjectID && id <= LastFreeObjectID) || id == RootTreeDirObjectID || id == FreeInoObjectID
}

// inodeKey checks a key naming an inode: the key of an INODE_ITEM or the
// location of a directory entry.
func (c *itemChecker) inodeKey(k Key, what string) error {
	if !validInodeNumber(k.ObjectID) {
		return c.fail("%s objectid %d is not a valid inode number", what, k.ObjectID)
	}
	if k.Offset != 0 {
		return c.fail("%s offset %d, want 0", what, k.Offset)
	}
	return nil
}

// rootKey checks a key naming a tree: the key of a ROOT_ITEM, or the
// location of a subvolume's directory entry (isRootItem false), which must
// name a subvolume tree.
func (c *itemChecker) rootKey(k Key, isRootItem bool, what string) error {
	switch {
	case k.ObjectID == 0:
		return c.fail("%s names root id 0", what)
	case !isRootItem && !k.ObjectID.IsFSTree():
		return c.fail("%s names tree %s, not a subvolume", what, k.ObjectID.TreeName())
	case k.ObjectID == TreeRelocObjectID && k.Offset == 0:
		return c.fail("%s: reloc tree with source root 0", what)
	}
	return nil
}

func (c *itemChecker) inodeItem() error {
	if err := c.inodeKey(c.k, "inode item key"); err != nil {
		return err
	}
	if err := c.size(InodeItemSize); err != nil {
		return err
	}
	var it InodeItem
	_ = it.Decode(c.data)
	switch {
	case !c.genOK(it.Generation):
		return c.fail("inode generation %d beyond super generation %d", it.Generation, c.p.SuperGen)
	case !c.genOK(it.TransID):
		return c.fail("inode transid %d beyond super generation %d", it.TransID, c.p.SuperGen)
	case !ValidMode(it.Mode):
		return c.fail("invalid inode mode %o", it.Mode)
	case it.IsDir() && it.NLink > 1:
		return c.fail("directory with %d links", it.NLink)
	}
	lo, hi := it.Flags&0xffffffff, it.Flags&^0xffffffff
	if lo&^InodeFlagMask != 0 {
		return c.fail("unknown inode flags 0x%x", uint64(lo&^InodeFlagMask))
	}
	if hi&^InodeROFlagMask != 0 {
		return c.fail("unknown read-only compatible inode flags 0x%x", uint64(hi&^InodeROFlagMask)>>32)
	}
	return nil
}

func (c *itemChecker) inodeRefs() error {
	refs, err := ParseInodeRefs(c.data)
	if err != nil {
		return c.wrap(err)
	}
	if len(refs) == 0 {
		return c.fail("empty inode ref item")
	}
	for i := range refs {
		if len(refs[i].Name) == 0 {
			return c.fail("inode ref entry %d has an empty name", i)
		}
	}
	return nil
}

func (c *itemChecker) inodeExtrefs() error {
	refs, err := ParseInodeExtrefs(c.data)
	if err != nil {
		return c.wrap(err)
	}
	if len(refs) == 0 {
		return c.fail("empty inode extref item")
	}
	for i := range refs {
		if len(refs[i].Name) == 0 {
			return c.fail("inode extref entry %d has an empty name", i)
		}
	}
	return nil
}

// maxXattrSize is BTRFS_MAX_XATTR_SIZE: name and value of one entry must fit
// one item; 0 when the node size is unknown.
func (c *itemChecker) maxXattrSize() int {
	if c.p.NodeSize == 0 {
		return 0
	}
	return MaxItemDataSize(int(c.p.NodeSize)) - DirItemBaseSize
}

func (c *itemChecker) dirItems() error {
	items, err := ParseDirItems(c.data)
	if err != nil {
		return c.wrap(err)
	}
	xattr := c.k.Type == XattrItemKey
	for i := range items {
		if err := c.dirEntry(i, &items[i], xattr); err != nil {
			return err
		}
	}
	return nil
}

func (c *itemChecker) dirEntry(i int, d *DirItem, xattr bool) error {
	switch loc := d.Location; {
	case xattr:
		if loc != (Key{}) {
			return c.fail("xattr entry %d location key %v, want zero", i, loc)
		}
	case loc.Type == RootItemKey:
		if err := c.rootKey(loc, false, fmt.Sprintf("entry %d location", i)); err != nil {
			return err
		}
	case loc.Type == InodeItemKey || loc.Type == 0:
		if err := c.inodeKey(loc, fmt.Sprintf("entry %d location", i)); err != nil {
			return err
		}
	default:
		return c.fail("entry %d location key type %v invalid", i, loc.Type)
	}
	ft, maxSize := d.Type.Base(), c.maxXattrSize()
	switch {
	case ft >= FtMax:
		return c.fail("entry %d has invalid type %d", i, uint8(d.Type))
	case xattr && ft != FtXattr:
		return c.fail("xattr entry %d has type %v", i, d.Type)
	case !xattr && ft == FtXattr:
		return c.fail("directory entry %d has type XATTR", i)
	case len(d.Name) > NameMax:
		return c.fail("entry %d name of %d bytes, max %d", i, len(d.Name), NameMax)
	case !xattr && len(d.Data) != 0:
		return c.fail("directory entry %d carries %d data bytes", i, len(d.Data))
	case maxSize != 0 && len(d.Name)+len(d.Data) > maxSize:
		return c.fail("entry %d name+data %d bytes, max %d", i, len(d.Name)+len(d.Data), maxSize)
	}
	if c.k.Type != DirIndexKey {
		if h := NameHash(d.Name); h != c.k.Offset {
			return c.fail("entry %d name hash %#x does not match key offset", i, h)
		}
	}
	return nil
}

// CheckLeafItems checks every item of a leaf with CheckItem and then the
// rules between neighbouring items: in subvolume trees an inode's items
// follow its INODE_ITEM (so a non-first XATTR/INODE_REF/DIR_ITEM/DIR_INDEX/
// EXTENT_DATA item shares the previous item's objectid), and file extents of
// one inode, csum items, extent items and dev extents do not overlap their
// predecessor. It first re-checks the leaf's layout, so it is safe on
// blocks that did not pass Node.Check; nodes (level > 0) pass.
func CheckLeafItems(n Node, p ItemCheckParams) error {
	if len(n) < HeaderSize {
		return Corruptf("tree block of %d bytes, shorter than its header", len(n))
	}
	if !n.IsLeaf() {
		return nil
	}
	if err := n.checkLeaf(len(n)); err != nil {
		return &CorruptError{What: err.Error()}
	}
	if p.Tree == 0 {
		p.Tree = n.Owner()
	}
	for i := range n.NumItems() {
		k, data := n.Key(i), n.ItemData(i)
		if err := CheckItem(k, data, p); err != nil {
			return err
		}
		if i > 0 {
			if err := checkNeighbours(n.Key(i-1), n.ItemData(i-1), k, data, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkNeighbours applies the rules between item prev (already checked) and
// the item k after it.
func checkNeighbours(prev Key, prevData []byte, k Key, data []byte, p ItemCheckParams) error {
	c := &itemChecker{k: k, data: data, p: p}
	switch k.Type {
	case XattrItemKey, InodeRefKey, DirItemKey, DirIndexKey, ExtentDataKey:
		if p.Tree.IsFSTree() && prev.ObjectID != k.ObjectID {
			return c.fail("previous item %v belongs to another inode: inode item missing", prev)
		}
	}
	switch {
	case k.Type == ExtentDataKey && prev.Type == ExtentDataKey && prev.ObjectID == k.ObjectID:
		var fe FileExtentItem
		if fe.Decode(prevData) == nil {
			if end, ok := fe.End(prev.Offset, p.SectorSize); !ok || end > k.Offset {
				return c.fail("file extent overlaps previous extent %v ending at %d", prev, end)
			}
		}
	case k.Type == ExtentCsumKey && prev.Type == ExtentCsumKey:
		if end, ok := CsumItemEnd(prev.Offset, len(prevData), p.CsumType.Size(), p.SectorSize); p.CsumType.Valid() && (!ok || end > k.Offset) {
			return c.fail("csum item overlaps previous csum item %v ending at %d", prev, end)
		}
	case (k.Type == ExtentItemKey || k.Type == MetadataItemKey) && (prev.Type == ExtentItemKey || prev.Type == MetadataItemKey):
		length := prev.Offset
		if prev.Type == MetadataItemKey {
			length = uint64(p.NodeSize)
		}
		if end := uint64(prev.ObjectID) + length; end < length || end > uint64(k.ObjectID) {
			return c.fail("extent overlaps previous extent %v ending at %d", prev, end)
		}
	case k.Type == DevExtentKey && prev.Type == DevExtentKey && prev.ObjectID == k.ObjectID:
		var d DevExtent
		if d.Decode(prevData) == nil {
			if end := prev.Offset + d.Length; end < d.Length || end > k.Offset {
				return c.fail("dev extent overlaps previous dev extent %v ending at %d", prev, end)
			}
		}
	}
	return nil
}
