package mkfs

import (
	"sort"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// treeBlock is one planned tree block.
type treeBlock struct {
	addr  disk.LogicalAddr
	owner disk.ObjectID
	level int
}

// blocks lists every tree block in address order.
func (b *builder) blocks() []treeBlock {
	out := make([]treeBlock, 0, len(b.addrs)+len(b.extra))
	for id, a := range b.addrs {
		out = append(out, treeBlock{a, id, b.levels[a]})
	}
	for _, a := range b.extra {
		out = append(out, treeBlock{a, disk.RootTreeObjectID, b.levels[a]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

// used is the bytes of tree blocks inside chunk p.
func (b *builder) used(p *plannedChunk) uint64 {
	var n uint64
	for _, tb := range b.blocks() {
		if tb.addr >= p.logical && tb.addr < p.end() {
			n += uint64(b.c.nodeSize)
		}
	}
	return n
}

// bytesUsed is the superblock's bytes_used: every block group's used.
func (b *builder) bytesUsed() uint64 {
	var n uint64
	for _, p := range b.l.list {
		n += b.used(p)
	}
	return n
}

// blockGroupItems are the BLOCK_GROUP_ITEMs, one per chunk.
func (b *builder) blockGroupItems() []item {
	var out []item
	for _, p := range b.l.list {
		out = append(out, item{key(disk.ObjectID(p.logical), disk.BlockGroupItemKey, p.item.Length),
			&disk.BlockGroupItem{Used: b.used(p), ChunkObjectID: disk.FirstChunkTreeObjectID, Flags: p.item.Type}})
	}
	return out
}

// extentItems are the block groups (unless the block-group tree holds
// them) and one extent item per tree block, referenced once by its owner:
// a skinny METADATA_ITEM, or without skinny metadata an EXTENT_ITEM with
// a tree block info naming the block's level and first key. all holds the
// items of the other trees, for those keys.
func (b *builder) extentItems(all map[disk.ObjectID][]item) []item {
	var out []item
	if !b.c.feat.bgt {
		out = b.blockGroupItems()
	}
	var own *disk.ExtentItem // the extent tree's block, whose first key is known last
	for _, tb := range b.blocks() {
		it := &disk.ExtentItem{Refs: 1, Generation: b.treeGen(tb.owner), Flags: disk.ExtentFlagTreeBlock,
			InlineRefs: []disk.InlineRef{{Type: disk.TreeBlockRefKey, Offset: uint64(tb.owner)}}}
		k := key(disk.ObjectID(tb.addr), disk.MetadataItemKey, uint64(tb.level))
		if !b.c.feat.skinny {
			k.Type, k.Offset = disk.ExtentItemKey, uint64(b.c.nodeSize)
			it.TreeBlock = &disk.TreeBlockInfo{Key: b.blockKey(tb, all), Level: uint8(tb.level)}
			if tb.owner == disk.ExtentTreeObjectID {
				own = it
			}
		}
		out = append(out, item{k, it})
	}
	if own != nil {
		if k, ok := b.bootstrapKey(disk.ExtentTreeObjectID); ok {
			own.TreeBlock.Key = k
		} else {
			own.TreeBlock.Key = firstKey(out)
		}
	}
	return out
}

// bootstrapKey is the first key progs 6.2 gave the block of tree id when
// it allocated it while only its bootstrap chunks existed, if that key is
// now stale: with DUP metadata the bootstrap SYSTEM chunk at 1 MiB is
// gone, but the dev, free-space and extent trees' infos still name its
// items.
func (b *builder) bootstrapKey(id disk.ObjectID) (disk.Key, bool) {
	if !b.c.metaDUP {
		return disk.Key{}, false
	}
	switch {
	case id == disk.DevTreeObjectID:
		return key(1, disk.DevExtentKey, sysSingleStart), true
	case id == disk.FreeSpaceTreeObjectID:
		return key(sysSingleStart, disk.FreeSpaceInfoKey, sysSingleSize), true
	case id == disk.ExtentTreeObjectID && !b.c.feat.bgt:
		return key(sysSingleStart, disk.BlockGroupItemKey, sysSingleSize), true
	}
	return disk.Key{}, false
}

// blockKey is the key the tree block info of tb records: the first key of
// its block as progs 6.2 records it, which is the key the block had when
// progs allocated it. progs makes the data-reloc and UUID trees empty and
// fills them afterwards, so theirs is the zero key.
func (b *builder) blockKey(tb treeBlock, all map[disk.ObjectID][]item) disk.Key {
	switch tb.owner {
	case disk.DataRelocTreeObjectID, disk.UUIDTreeObjectID:
		return disk.Key{}
	case disk.RootTreeObjectID:
		return b.rootKeys[tb.addr]
	}
	if k, ok := b.bootstrapKey(tb.owner); ok {
		return k
	}
	return firstKey(all[tb.owner])
}

// firstKey is the smallest key of items, the zero key if there are none.
func firstKey(items []item) disk.Key {
	if len(items) == 0 {
		return disk.Key{}
	}
	k := items[0].key
	for _, it := range items[1:] {
		if it.key.Less(k) {
			k = it.key
		}
	}
	return k
}

// fstItems describe, for every block group, the gaps between its tree
// blocks as maximal free extents.
func (b *builder) fstItems() []item {
	var out []item
	for _, p := range b.l.list {
		var free [][2]uint64
		at := uint64(p.logical)
		for _, tb := range b.blocks() {
			a := uint64(tb.addr)
			if a < uint64(p.logical) || a >= uint64(p.end()) {
				continue
			}
			if a > at {
				free = append(free, [2]uint64{at, a - at})
			}
			at = a + uint64(b.c.nodeSize)
		}
		if end := uint64(p.end()); at < end {
			free = append(free, [2]uint64{at, end - at})
		}
		out = append(out, item{key(disk.ObjectID(p.logical), disk.FreeSpaceInfoKey, p.item.Length),
			&disk.FreeSpaceInfo{ExtentCount: uint32(len(free))}})
		for _, f := range free {
			out = append(out, item{key(disk.ObjectID(f[0]), disk.FreeSpaceExtentKey, f[1]), &disk.EmptyItem{}})
		}
	}
	return out
}

// rootItem is the ROOT_ITEM of tree id as progs writes it for a new
// filesystem.
func (b *builder) rootItem(id disk.ObjectID) *disk.RootItem {
	gen := b.treeGen(id)
	r := &disk.RootItem{Generation: gen, GenerationV2: gen, Bytenr: b.addrs[id],
		BytesUsed: uint64(b.c.nodeSize), Refs: 1}
	// The embedded inode is unused by readers; progs fills it like this.
	r.Inode = disk.InodeItem{Generation: 1, Size: 3, NLink: 1, NBytes: uint64(b.c.nodeSize), Mode: disk.ModeDir | 0o755}
	if id == disk.FSTreeObjectID || id == disk.DataRelocTreeObjectID {
		r.RootDirID = disk.FirstFreeInode
	}
	if id == disk.FSTreeObjectID {
		r.UUID = b.c.fsUUID
		r.CTime, r.OTime = b.c.now, b.c.now
	}
	return r
}

// rootTreeItems are the ROOT_ITEMs of every tree but root and chunk, the
// root tree's directory (inode 6) and its "default" entry naming tree 5.
func (b *builder) rootTreeItems() []item {
	name := []byte("default")
	out := []item{
		{key(disk.FSTreeObjectID, disk.InodeRefKey, uint64(disk.RootTreeDirObjectID)), &disk.InodeRefs{{Index: 0, Name: name}}},
		{key(disk.RootTreeDirObjectID, disk.InodeItemKey, 0), b.dirInode(genRootDir, uint64(b.c.nodeSize), b.c.now)},
		{key(disk.RootTreeDirObjectID, disk.InodeRefKey, uint64(disk.RootTreeDirObjectID)), &disk.InodeRefs{{Index: 0, Name: []byte("..")}}},
		{key(disk.RootTreeDirObjectID, disk.DirItemKey, disk.NameHash(name)), &disk.DirItems{{
			Location: key(disk.FSTreeObjectID, disk.RootItemKey, ^uint64(0)), Type: disk.FtDir, Name: name}}},
	}
	for id := range b.addrs {
		if id == disk.RootTreeObjectID || id == disk.ChunkTreeObjectID {
			continue
		}
		out = append(out, item{key(id, disk.RootItemKey, 0), b.rootItem(id)})
	}
	return out
}
