package txn

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Chunk allocation policy (kernel conventions, docs btrfs-format §7.4).
const (
	devReserved   = 1 << 20  // the first MiB of every device never holds chunks
	chunkAlign    = 64 << 10 // stripe sizes and device offsets: whole 64 KiB stripe elements
	minStripe     = 1 << 20  // smaller holes are not worth a chunk
	metaChunkCap  = 256 << 20
	bigMetaCap    = 1 << 30
	bigFSBytes    = 50 << 30 // above this, metadata chunks may reach bigMetaCap
	sysChunkCap   = 32 << 20
	dataChunkCap  = 1 << 30
	percentOfFS   = 10 // a chunk never exceeds this share of the filesystem
	chunkStripeLn = 64 << 10
)

// growth is the chunk-allocation state of one transaction: which device
// bytes are still unallocated, and the chunks made so far whose items may
// not be in the trees yet.
type growth struct {
	free   map[disk.DevID]*alloc.Extents // device bytes in no dev extent, committed or new
	chunks []*newChunk
	added  map[disk.DevID]uint64 // dev extent bytes added per device
	shrunk *shrinkState          // what Shrink changed (shrink.go), nil if not called
	grown  map[disk.DevID]uint64 // new sizes of the devices Grow grew (resize.go)
}

// newChunk is a chunk allocated in the running transaction.
type newChunk struct {
	logical  disk.LogicalAddr
	item     disk.ChunkItem
	stripe   uint64 // bytes per device stripe (the DEV_EXTENT length)
	inserted bool   // its tree items are in the running trees
}

// growthOf returns t's chunk-allocation state, nil if it made no chunk yet.
func (t *Txn) growthOf() *growth {
	t.growMu.Lock()
	defer t.growMu.Unlock()
	return t.grow
}

// endGrowth forgets t's chunk-allocation state.
func (t *Txn) endGrowth() {
	t.growMu.Lock()
	t.grow = nil
	t.growMu.Unlock()
}

// startGrowth returns t's state, loading the unallocated device space from
// the committed dev tree on first use (a transaction only ever adds dev
// extents, so committed plus its own is the current picture).
func (t *Txn) startGrowth() (*growth, error) {
	if g := t.growthOf(); g != nil {
		return g, nil
	}
	free, err := t.fs.deviceFree()
	if err != nil {
		return nil, fmt.Errorf("dev tree: %w", err)
	}
	g := &growth{free: free, added: map[disk.DevID]uint64{}}
	t.growMu.Lock()
	t.grow = g
	t.growMu.Unlock()
	return g, nil
}

// deviceFree returns, per device, the bytes from 1 MiB to its end that no
// committed DEV_EXTENT covers.
func (fs *FS) deviceFree() (map[disk.DevID]*alloc.Extents, error) {
	free := map[disk.DevID]*alloc.Extents{}
	for id, m := range fs.set.Members {
		e := &alloc.Extents{}
		if total := m.Super.DevItem.TotalBytes; total > devReserved {
			e.Insert(devReserved, total)
		}
		free[id] = e
	}
	ri, _, err := fs.rootItem(disk.DevTreeObjectID)
	if err != nil {
		return nil, err
	}
	root := ctree.Root{Addr: ri.Bytenr, Level: int(ri.Level), Generation: ri.Generation, Owner: disk.DevTreeObjectID}
	err = ctree.Walk(fs, root, func(n disk.Node, _ int) error {
		if !n.IsLeaf() {
			return nil
		}
		for i := 0; i < n.NumItems(); i++ {
			k := n.Key(i)
			if k.Type != disk.DevExtentKey {
				continue
			}
			var de disk.DevExtent
			if err := de.Decode(n.ItemData(i)); err != nil {
				return &disk.CorruptError{Logical: n.Bytenr(), Tree: disk.DevTreeObjectID, Key: &k, What: "dev extent", Err: err}
			}
			e := free[disk.DevID(k.ObjectID)]
			if e == nil || k.Offset+de.Length < k.Offset {
				return &disk.CorruptError{Logical: n.Bytenr(), Tree: disk.DevTreeObjectID, Key: &k,
					What: "dev extent of an unknown device or past 2^64"}
			}
			e.Remove(k.Offset, k.Offset+de.Length)
		}
		return nil
	})
	return free, err
}

// growLocked allocates a new chunk for block groups of type want (with
// t.mu held): the chunk is mapped and its group allocatable at once, and
// its tree items are inserted by settleChunks during Commit, so nothing
// here touches a tree (Alloc runs in the middle of tree operations).
func (t *Txn) growLocked(want uint64) error {
	flags, err := t.chunkFlags(want)
	if err != nil {
		return err
	}
	g, err := t.startGrowth()
	if err != nil {
		return err
	}
	nc, err := t.planChunk(g, flags)
	if err != nil {
		return err
	}
	if flags&disk.BlockGroupSystem != 0 && t.sysArrayBytes(g)+disk.KeySize+nc.item.Size() > disk.SysChunkArrayMax {
		return fmt.Errorf("%w: sys_chunk_array full", alloc.ErrNoSpace)
	}
	if err := t.fs.chunks.Add(nc.logical, &nc.item); err != nil {
		return fmt.Errorf("new chunk: %w", err)
	}
	c, err := t.fs.chunks.Lookup(nc.logical)
	if err == nil {
		err = t.fs.space.AddGroup(uint64(nc.logical), nc.item.Length, flags, c.SuperblockExclusions())
	}
	if err != nil {
		t.fs.chunks.Remove(nc.logical)
		return fmt.Errorf("new chunk: %w", err)
	}
	for _, s := range nc.item.Stripes {
		g.free[s.DevID].Remove(uint64(s.Offset), uint64(s.Offset)+nc.stripe)
		g.added[s.DevID] += nc.stripe
	}
	g.chunks = append(g.chunks, nc)
	t.touch(uint64(nc.logical))
	return nil
}

// chunkFlags returns the type and profile of the chunk to make: those of
// the highest existing chunk of type want, so a filesystem keeps the
// profiles it uses (the newest wins after a conversion).
func (t *Txn) chunkFlags(want uint64) (uint64, error) {
	var flags uint64
	for c := range t.fs.chunks.All() {
		if c.Type()&want != 0 {
			flags = c.Type()
		}
	}
	if flags == 0 {
		return 0, fmt.Errorf("%w: no chunk of type %#x to take the profile from", ErrUnsupported, want)
	}
	return flags, nil
}

// sysArrayBytes is the size the sys_chunk_array will have with the SYSTEM
// chunks allocated so far.
func (t *Txn) sysArrayBytes(g *growth) int {
	n := int(t.fs.sb.SysChunkArraySize)
	for _, c := range g.chunks {
		if c.item.Type&disk.BlockGroupSystem != 0 {
			n += disk.KeySize + c.item.Size()
		}
	}
	return n
}

// shape is how a profile lays a chunk on devices.
type shape struct {
	stripes int    // stripes wanted (0: as many devices as have room)
	min     int    // fewest stripes acceptable
	sub     uint16 // sub_stripes
	sameDev bool   // DUP: every stripe on one device
}

// shapeOf returns the layout of profile p.
func shapeOf(p chunk.Profile) (shape, error) {
	switch p {
	case chunk.Single:
		return shape{stripes: 1, min: 1, sub: 1}, nil
	case chunk.DUP:
		return shape{stripes: 2, min: 2, sub: 1, sameDev: true}, nil
	case chunk.RAID1:
		return shape{stripes: 2, min: 2, sub: 1}, nil
	case chunk.RAID1C3:
		return shape{stripes: 3, min: 3, sub: 1}, nil
	case chunk.RAID1C4:
		return shape{stripes: 4, min: 4, sub: 1}, nil
	case chunk.RAID0:
		return shape{min: 2, sub: 1}, nil
	case chunk.RAID10:
		return shape{min: 4, sub: 2}, nil
	case chunk.RAID5:
		// Every device with room, one stripe of each row parity
		// (internal/chunk writes it).
		return shape{min: 2, sub: 1}, nil
	case chunk.RAID6:
		return shape{min: 3, sub: 1}, nil
	}
	return shape{}, fmt.Errorf("%w: allocating %s chunks", ErrUnsupported, p)
}

// dataStripes is how many stripes of n carry distinct data.
func (s shape) dataStripes(p chunk.Profile, n int) int {
	switch p {
	case chunk.RAID0:
		return n
	case chunk.RAID10:
		return n / 2
	case chunk.RAID5:
		return n - 1
	case chunk.RAID6:
		return n - 2
	}
	return 1
}

// planChunk chooses the logical start, size and device ranges of a chunk
// with the given flags: the largest stripe size up to the policy target
// (halving down to 1 MiB) for which holes exist.
func (t *Txn) planChunk(g *growth, flags uint64) (*newChunk, error) {
	prof, _ := chunk.ProfileOf(flags)
	sh, err := shapeOf(prof)
	if err != nil {
		return nil, err
	}
	capBytes := uint64(metaChunkCap)
	switch {
	case flags&disk.BlockGroupSystem != 0:
		capBytes = sysChunkCap
	case flags&disk.BlockGroupTypeMask == disk.BlockGroupData:
		capBytes = dataChunkCap
	case t.fs.sb.TotalBytes > bigFSBytes:
		capBytes = bigMetaCap
	}
	target := min(capBytes, t.fs.sb.TotalBytes/100*percentOfFS)
	expect := sh.stripes
	if expect == 0 {
		expect = len(g.free)
	}
	size := target / uint64(max(1, sh.dataStripes(prof, expect))) / chunkAlign * chunkAlign
	for ; size >= minStripe; size = size / 2 / chunkAlign * chunkAlign {
		stripes := t.placeStripes(g, sh, size)
		if stripes == nil {
			continue
		}
		length := size * uint64(sh.dataStripes(prof, len(stripes)))
		it := disk.ChunkItem{Length: length, Owner: disk.ExtentTreeObjectID, StripeLen: chunkStripeLn, Type: flags,
			IOAlign: chunkStripeLn, IOWidth: chunkStripeLn, SectorSize: t.fs.sb.SectorSize,
			NumStripes: uint16(len(stripes)), SubStripes: sh.sub, Stripes: stripes}
		return &newChunk{logical: t.nextLogical(), item: it, stripe: size}, nil
	}
	return nil, fmt.Errorf("%w: no device room for a %s chunk", alloc.ErrNoSpace, prof)
}

// nextLogical is where a new chunk starts: the end of the highest chunk.
func (t *Txn) nextLogical() disk.LogicalAddr {
	var end disk.LogicalAddr
	for c := range t.fs.chunks.All() {
		end = max(end, c.End())
	}
	return (end + chunkAlign - 1) / chunkAlign * chunkAlign
}

// placeStripes finds device ranges of size bytes for one chunk, first fit
// on each device, devices with the most unallocated bytes first. It
// returns nil when the shape cannot be met.
func (t *Txn) placeStripes(g *growth, sh shape, size uint64) []disk.Stripe {
	ids := make([]disk.DevID, 0, len(g.free))
	for id := range g.free {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b disk.DevID) int {
		if c := cmp.Compare(g.free[b].Bytes(), g.free[a].Bytes()); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var out []disk.Stripe
	for _, id := range ids {
		e := g.free[id].Clone()
		var got []disk.Stripe
		for n := 0; n < max(1, boolInt(sh.sameDev)*sh.stripes); n++ {
			a, ok := e.Find(size, chunkAlign, 0)
			if !ok {
				break
			}
			e.Remove(a, a+size)
			got = append(got, disk.Stripe{DevID: id, Offset: disk.PhysicalAddr(a), DevUUID: t.fs.set.Members[id].Super.DevItem.UUID})
		}
		if sh.sameDev {
			if len(got) == sh.stripes {
				return got
			}
			continue
		}
		out = append(out, got...)
		if sh.stripes != 0 && len(out) == sh.stripes {
			return out
		}
	}
	if sh.sub == 2 {
		out = out[:len(out)/2*2]
	}
	if sh.stripes != 0 || sh.sameDev || len(out) < sh.min {
		return nil
	}
	return out
}

// boolInt is 1 for true.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// settleChunks inserts the tree items of every chunk allocated so far and
// not yet recorded: CHUNK_ITEM and DEV_ITEM bytes_used (chunk tree),
// DEV_EXTENTs (dev tree), BLOCK_GROUP_ITEM (extent tree) and
// FREE_SPACE_INFO (free-space tree; settleFST then fills it in). Inserting
// may allocate blocks and so more chunks: it loops until none is left.
func (t *Txn) settleChunks() error {
	g := t.growthOf()
	if g == nil {
		return nil
	}
	for {
		t.mu.Lock()
		var nc *newChunk
		for _, c := range g.chunks {
			if !c.inserted {
				c.inserted, nc = true, c
				break
			}
		}
		t.mu.Unlock()
		if nc == nil {
			return nil
		}
		if err := t.insertChunk(nc); err != nil {
			return fmt.Errorf("chunk %d: %w", nc.logical, err)
		}
		t.mu.Lock()
		t.changes++
		t.mu.Unlock()
	}
}

// insertChunk adds the tree items of one new chunk.
func (t *Txn) insertChunk(nc *newChunk) error {
	if err := t.insertChunkItems(nc); err != nil {
		return err
	}
	bt, err := t.Tree(t.fs.bgTree)
	if err != nil {
		return err
	}
	bg := disk.BlockGroupItem{ChunkObjectID: disk.FirstChunkTreeObjectID, Flags: nc.item.Type}
	buf := make([]byte, bg.Size())
	bg.Encode(buf)
	key := disk.Key{ObjectID: disk.ObjectID(nc.logical), Type: disk.BlockGroupItemKey, Offset: nc.item.Length}
	if err := bt.InsertItem(t.tx, key, buf); err != nil {
		return fmt.Errorf("block group item: %w", err)
	}
	if !t.keepsFST() {
		return nil
	}
	ft, err := t.Tree(disk.FreeSpaceTreeObjectID)
	if err != nil {
		return err
	}
	var info disk.FreeSpaceInfo
	buf = make([]byte, info.Size())
	info.Encode(buf)
	key.Type = disk.FreeSpaceInfoKey
	if err := ft.InsertItem(t.tx, key, buf); err != nil {
		return fmt.Errorf("free space info: %w", err)
	}
	t.mu.Lock()
	t.touch(uint64(nc.logical)) // settleFST must write the group's extents
	t.mu.Unlock()
	return nil
}

// insertChunkItems adds the CHUNK_ITEM, raises the DEV_ITEMs' bytes_used
// and adds one DEV_EXTENT per stripe.
func (t *Txn) insertChunkItems(nc *newChunk) error {
	ct, err := t.Tree(disk.ChunkTreeObjectID)
	if err != nil {
		return err
	}
	buf := make([]byte, nc.item.Size())
	nc.item.Encode(buf)
	key := disk.Key{ObjectID: disk.FirstChunkTreeObjectID, Type: disk.ChunkItemKey, Offset: uint64(nc.logical)}
	if err := ct.InsertItem(t.tx, key, buf); err != nil {
		return fmt.Errorf("chunk item: %w", err)
	}
	dt, err := t.Tree(disk.DevTreeObjectID)
	if err != nil {
		return err
	}
	for _, s := range nc.item.Stripes {
		dk := disk.Key{ObjectID: disk.DevItemsObjectID, Type: disk.DevItemKey, Offset: uint64(s.DevID)}
		err := ct.UpdateItem(t.tx, dk, func(b []byte) error {
			var d disk.DevItem
			if err := d.Decode(b); err != nil {
				return err
			}
			d.BytesUsed += nc.stripe
			d.Encode(b)
			return nil
		})
		if err != nil {
			return fmt.Errorf("dev item %d: %w", s.DevID, err)
		}
		de := disk.DevExtent{ChunkTree: disk.ChunkTreeObjectID, ChunkObjectID: disk.FirstChunkTreeObjectID,
			ChunkOffset: nc.logical, Length: nc.stripe, ChunkTreeUUID: t.fs.chunkTreeUUID}
		b := make([]byte, de.Size())
		de.Encode(b)
		k := disk.Key{ObjectID: disk.ObjectID(s.DevID), Type: disk.DevExtentKey, Offset: uint64(s.Offset)}
		if err := dt.InsertItem(t.tx, k, b); err != nil {
			return fmt.Errorf("dev extent %v: %w", k, err)
		}
	}
	return nil
}

// growSuper appends the new SYSTEM chunks to sb's sys_chunk_array and
// raises bytes_used of sb's dev_item by what this transaction allocated.
func (t *Txn) growSuper(sb *disk.Superblock) error {
	g := t.growthOf()
	if g == nil {
		return nil
	}
	for _, c := range g.chunks {
		if c.item.Type&disk.BlockGroupSystem == 0 {
			continue
		}
		n := int(sb.SysChunkArraySize)
		if n+disk.KeySize+c.item.Size() > disk.SysChunkArrayMax {
			return fmt.Errorf("%w: sys_chunk_array full", alloc.ErrNoSpace)
		}
		key := disk.Key{ObjectID: disk.FirstChunkTreeObjectID, Type: disk.ChunkItemKey, Offset: uint64(c.logical)}
		key.Encode(sb.SysChunkArray[n:])
		c.item.Encode(sb.SysChunkArray[n+disk.KeySize:])
		sb.SysChunkArraySize = uint32(n + disk.KeySize + c.item.Size())
	}
	sb.DevItem.BytesUsed += g.added[sb.DevItem.DevID]
	return nil
}

// growDevices raises bytes_used in every device's own superblock dev_item,
// which writeSupers copies; called once nothing can abort the commit.
func (t *Txn) growDevices() {
	g := t.growthOf()
	if g == nil {
		return
	}
	t.shrinkDevices(g)
	seen := map[*disk.Superblock]bool{}
	for id, m := range t.fs.set.Members {
		if !seen[m.Super] {
			seen[m.Super] = true
			m.Super.DevItem.BytesUsed += g.added[id]
		}
	}
}

// dropChunks unmaps the chunks of an abandoned transaction, before the
// free-space model is reloaded from the committed trees.
func (t *Txn) dropChunks() {
	if g := t.growthOf(); g != nil {
		for _, c := range g.chunks {
			t.fs.chunks.Remove(c.logical)
		}
		t.undoShrink(g)
	}
	t.endGrowth()
}
