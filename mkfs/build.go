package mkfs

import (
	"fmt"
	"sort"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// The two transaction ids the trees are stamped with. progs 6.2 finishes
// with generation 6 and leaves the fs, csum, data-reloc and UUID trees as
// written in generation 5; using the same numbers keeps the images
// comparable item by item.
const (
	genEarly disk.Generation = 5
	genFinal disk.Generation = 6
	// genRootDir is the generation progs gives the fs tree's root
	// directory and the root tree's directory inode.
	genRootDir disk.Generation = 3
)

// earlyTrees are the trees written in genEarly; all others get genFinal.
var earlyTrees = map[disk.ObjectID]bool{
	disk.FSTreeObjectID: true, disk.CsumTreeObjectID: true,
	disk.DataRelocTreeObjectID: true, disk.UUIDTreeObjectID: true,
}

// treeGen is the generation of tree id's block. When progs adds no DUP
// chunk after its bootstrap (everything SINGLE) it keeps the chunk and dev
// trees from generation 5.
func (b *builder) treeGen(id disk.ObjectID) disk.Generation {
	allSingle := !b.c.metaDUP && !b.c.dataDUP
	if earlyTrees[id] || allSingle && (id == disk.ChunkTreeObjectID || id == disk.DevTreeObjectID) {
		return genEarly
	}
	return genFinal
}

// item is one key and payload to insert.
type item struct {
	key disk.Key
	val disk.Payload
}

func key(id disk.ObjectID, t disk.KeyType, off uint64) disk.Key {
	return disk.Key{ObjectID: id, Type: t, Offset: off}
}

// builder builds all trees of a new filesystem in a store.
type builder struct {
	c     *config
	l     *layout
	addrs map[disk.ObjectID]disk.LogicalAddr
	// extra are the root tree's blocks past its first, and levels the
	// level of each (planRootTree).
	extra  []disk.LogicalAddr
	levels map[disk.LogicalAddr]int
	// rootKeys is the first key of each root tree block (planRootTree).
	rootKeys map[disk.LogicalAddr]disk.Key
	s        *store
	roots    map[disk.ObjectID]ctree.Root
}

// build creates every tree and returns the store holding their blocks.
func build(c *config, l *layout) (*builder, error) {
	b := &builder{c: c, l: l, addrs: l.blockAddrs(c), levels: map[disk.LogicalAddr]int{},
		rootKeys: map[disk.LogicalAddr]disk.Key{}, roots: map[disk.ObjectID]ctree.Root{}}
	if err := b.planRootTree(); err != nil {
		return nil, err
	}
	if err := l.checkSupers(c, b.extra); err != nil {
		return nil, err
	}
	b.s = newStore(c, b.addrs, b.extra)
	all := map[disk.ObjectID][]item{
		disk.FSTreeObjectID:        b.subvolItems(genRootDir, true),
		disk.DataRelocTreeObjectID: b.subvolItems(genEarly, false),
		disk.CsumTreeObjectID:      nil,
		disk.UUIDTreeObjectID:      {{disk.UUIDKey(c.fsUUID, disk.UUIDKeySubvol), &disk.UUIDItem{disk.FSTreeObjectID}}},
		disk.ChunkTreeObjectID:     b.chunkItems(),
		disk.DevTreeObjectID:       b.devItems(),
		// Every root is planned, so the root tree's ROOT_ITEMs can be
		// made before the trees they describe are written.
		disk.RootTreeObjectID: b.rootTreeItems(),
	}
	if c.feat.fst {
		all[disk.FreeSpaceTreeObjectID] = b.fstItems()
	}
	if c.feat.bgt {
		all[disk.BlockGroupTreeObjectID] = b.blockGroupItems()
	}
	// Last: without skinny metadata its items name the first key of
	// every other tree's block.
	all[disk.ExtentTreeObjectID] = b.extentItems(all)
	for _, gen := range []disk.Generation{genEarly, genFinal} {
		var order []disk.ObjectID
		for _, id := range append([]disk.ObjectID{disk.ChunkTreeObjectID}, treeOrder...) {
			if _, ok := b.addrs[id]; ok && b.treeGen(id) == gen {
				order = append(order, id)
			}
		}
		if err := b.transaction(gen, all, order); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// transaction creates the listed trees in one ctree transaction of gen,
// fills them and writes their blocks into the store.
func (b *builder) transaction(gen disk.Generation, items map[disk.ObjectID][]item, order []disk.ObjectID) error {
	tx := ctree.NewTrans(b.s, gen, nil)
	for _, id := range order {
		t, err := ctree.Create(tx, id, ctree.Options{})
		if err != nil {
			return fmt.Errorf("mkfs: create tree %s: %w", id.TreeName(), err)
		}
		list := items[id]
		sort.Slice(list, func(i, j int) bool { return list[i].key.Less(list[j].key) })
		for _, it := range list {
			if err := t.InsertItem(tx, it.key, disk.EncodePayload(it.val)); err != nil {
				return fmt.Errorf("mkfs: tree %s: insert %v: %w", id.TreeName(), it.key, err)
			}
		}
		r := t.Root()
		if want := b.rootAddr(id); r.Addr != want || r.Level != b.levels[want] {
			return fmt.Errorf("mkfs: tree %s ended at %d level %d, planned %d level %d", id.TreeName(), r.Addr, r.Level, want, b.levels[want])
		}
		b.roots[id] = r
	}
	for a, lv := range b.s.levels {
		if b.levels[a] != lv {
			return fmt.Errorf("mkfs: tree block %d has level %d, planned %d", a, lv, b.levels[a])
		}
	}
	if _, err := tx.WriteDirty(); err != nil {
		return fmt.Errorf("mkfs: write blocks of generation %d: %w", gen, err)
	}
	return nil
}

// rootAddr is where tree id's root block is planned: its one block, or
// for a root tree of several blocks the highest-level one.
func (b *builder) rootAddr(id disk.ObjectID) disk.LogicalAddr {
	a := b.addrs[id]
	if id == disk.RootTreeObjectID {
		for _, x := range b.extra {
			if b.levels[x] > b.levels[a] {
				a = x
			}
		}
	}
	return a
}

// planRootTree finds the blocks the root tree needs by building it once
// in a scratch store. Every other tree fits one leaf, but with small
// nodes (4 KiB) and the block-group tree the root tree's ROOT_ITEMs do
// not: mkfs.btrfs 6.19 then makes it two levels high too. The blocks
// past the first are placed after every other tree's, in the order the
// build allocates them, so the real build takes the same addresses and
// the extent and free-space trees can describe them beforehand.
func (b *builder) planRootTree() error {
	id := disk.RootTreeObjectID
	scratch := newStore(b.c, map[disk.ObjectID]disk.LogicalAddr{id: b.addrs[id]}, nil)
	scratch.scratch = true
	tx := ctree.NewTrans(scratch, genFinal, nil)
	t, err := ctree.Create(tx, id, ctree.Options{})
	if err != nil {
		return fmt.Errorf("mkfs: plan the root tree: %w", err)
	}
	list := b.rootTreeItems()
	sort.Slice(list, func(i, j int) bool { return list[i].key.Less(list[j].key) })
	for _, it := range list {
		if err := t.InsertItem(tx, it.key, disk.EncodePayload(it.val)); err != nil {
			return fmt.Errorf("mkfs: plan the root tree: insert %v: %w", it.key, err)
		}
	}
	next := disk.LogicalAddr(0)
	for oid, a := range b.addrs {
		if oid != disk.ChunkTreeObjectID {
			next = max(next, a+disk.LogicalAddr(b.c.nodeSize))
		}
	}
	for n := range scratch.given[id] {
		a := b.addrs[id] + disk.LogicalAddr(n*b.c.nodeSize)
		lv := scratch.levels[a]
		if lv < 0 {
			return fmt.Errorf("mkfs: plan the root tree: block %d freed while building", n)
		}
		first, _ := tx.FirstKey(a)
		if n > 0 {
			b.extra = append(b.extra, next)
			a, next = next, next+disk.LogicalAddr(b.c.nodeSize)
		}
		b.levels[a] = lv
		b.rootKeys[a] = first
	}
	return nil
}

// dirInode is the inode of an empty directory as progs writes it.
func (b *builder) dirInode(gen disk.Generation, nbytes uint64, otime disk.Timespec) *disk.InodeItem {
	now := b.c.now
	return &disk.InodeItem{Generation: gen, NBytes: nbytes, NLink: 1, Mode: disk.ModeDir | 0o755,
		ATime: now, CTime: now, MTime: now, OTime: otime}
}

// subvolItems are the root directory (inode 256) of the fs tree or of
// the data-reloc tree. progs charges the fs tree's root directory one
// node of nbytes and leaves the data-reloc one at 0 without an otime.
func (b *builder) subvolItems(gen disk.Generation, fsTree bool) []item {
	ino := b.dirInode(gen, 0, disk.Timespec{})
	if fsTree {
		ino.NBytes, ino.OTime = uint64(b.c.nodeSize), b.c.now
	}
	return []item{
		{key(disk.FirstFreeInode, disk.InodeItemKey, 0), ino},
		{key(disk.FirstFreeInode, disk.InodeRefKey, uint64(disk.FirstFreeInode)), &disk.InodeRefs{{Index: 0, Name: []byte("..")}}},
	}
}

// devItem is the one device's item, also copied into the superblock.
func (b *builder) devItem() disk.DevItem {
	ss := uint32(b.c.sectorSize)
	return disk.DevItem{DevID: 1, TotalBytes: b.c.size, BytesUsed: b.l.devUsed,
		IOAlign: ss, IOWidth: ss, SectorSize: ss, UUID: b.c.devUUID, FSID: b.c.fsid}
}

func (b *builder) chunkItems() []item {
	d := b.devItem()
	out := []item{{key(disk.DevItemsObjectID, disk.DevItemKey, 1), &d}}
	for _, p := range b.l.list {
		ci := p.item
		out = append(out, item{key(disk.FirstChunkTreeObjectID, disk.ChunkItemKey, uint64(p.logical)), &ci})
	}
	return out
}

func (b *builder) devItems() []item {
	var out []item
	for _, p := range b.l.list {
		for _, st := range p.item.Stripes {
			out = append(out, item{key(1, disk.DevExtentKey, uint64(st.Offset)), &disk.DevExtent{
				ChunkTree: disk.ChunkTreeObjectID, ChunkObjectID: disk.FirstChunkTreeObjectID,
				ChunkOffset: p.logical, Length: p.stripeSize(), ChunkTreeUUID: b.c.chunkUUID}})
		}
	}
	return out
}
