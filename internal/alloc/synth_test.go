package alloc_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

const (
	synthNode   = 16384
	synthSector = 4096
	mib         = 1 << 20
)

// item is one synthetic leaf item.
type item struct {
	k    disk.Key
	data []byte
}

// oneLeaf is a ctree.Reader whose every tree is a single leaf.
type oneLeaf struct{ leaf disk.Node }

func (o oneLeaf) ReadBlock(disk.LogicalAddr, disk.Expect) (disk.Node, error) { return o.leaf, nil }

// makeLeaf packs items into a leaf block in the given order (the reader does
// not check it, so fuzzing may feed unsorted keys).
func makeLeaf(items []item) (oneLeaf, bool) {
	b := make([]byte, synthNode)
	h := disk.Header{NumItems: uint32(len(items))}
	h.Encode(b)
	end := synthNode - disk.HeaderSize
	for i, it := range items {
		end -= len(it.data)
		if disk.HeaderSize+disk.ItemSize*(i+1) > disk.HeaderSize+end {
			return oneLeaf{}, false
		}
		copy(b[disk.HeaderSize+end:], it.data)
		disk.PutItemHeader(b, i, disk.Item{Key: it.k, Offset: uint32(end), Size: uint32(len(it.data))})
	}
	return oneLeaf{disk.Node(b)}, true
}

func leafOf(t *testing.T, items ...item) oneLeaf {
	t.Helper()
	l, ok := makeLeaf(items)
	if !ok {
		t.Fatal("items do not fit a leaf")
	}
	return l
}

func info(start, length uint64, count, flags uint32) item {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, count)
	binary.LittleEndian.PutUint32(b[4:], flags)
	return item{disk.Key{ObjectID: disk.ObjectID(start), Type: disk.FreeSpaceInfoKey, Offset: length}, b}
}

func fext(start, length uint64) item {
	return item{disk.Key{ObjectID: disk.ObjectID(start), Type: disk.FreeSpaceExtentKey, Offset: length}, nil}
}

func fbitmap(start, length uint64, bits []byte) item {
	return item{disk.Key{ObjectID: disk.ObjectID(start), Type: disk.FreeSpaceBitmapKey, Offset: length}, bits}
}

func TestFreeSpaceTreeSynthetic(t *testing.T) {
	const g = 16 * mib
	bits := make([]byte, disk.FreeSpaceBitmapSize(mib, synthSector)) // 256 sectors
	bits[0] = 0x33                                                   // sectors 0,1,4,5
	bits[31] = 0x80                                                  // sector 255 ...
	bits2 := make([]byte, len(bits))
	bits2[0] = 0x01 // ... runs on into the next bitmap's sector 0
	root := ctree.Root{Owner: disk.FreeSpaceTreeObjectID}
	good := []item{info(g, 2*mib, 3, disk.FreeSpaceUsingBitmaps), fbitmap(g, mib, bits), fbitmap(g+mib, mib, bits2)}
	f, err := alloc.LoadFreeSpaceTree(leafOf(t, good...), root, synthSector)
	if err != nil {
		t.Fatal(err)
	}
	want := []alloc.Range{{Start: g, End: g + 2*synthSector}, {Start: g + 4*synthSector, End: g + 6*synthSector},
		{Start: g + 255*synthSector, End: g + 257*synthSector}}
	if got := f.Group(g, 2*mib).Free.Ranges(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("free %v, want %v", got, want)
	}
	bad := map[string][]item{
		"count":         {info(g, 2*mib, 2, 1), fbitmap(g, mib, bits), fbitmap(g+mib, mib, bits2)},
		"flag-extent":   {info(g, 2*mib, 1, 1), fext(g, 4096)},
		"flag-bitmap":   {info(g, 2*mib, 3, 0), fbitmap(g, mib, bits), fbitmap(g+mib, mib, bits2)},
		"outside":       {info(g, 2*mib, 1, 0), fext(g+2*mib, 4096)},
		"no-info":       {fext(g, 4096)},
		"bitmap-size":   {info(g, 2*mib, 2, 1), fbitmap(g, mib, bits[:10])},
		"unaligned":     {info(g, 2*mib, 1, 0), fext(g+1, 4096)},
		"overlap":       {info(g, 2*mib, 1, 0), fext(g, 8192), fext(g+4096, 8192)},
		"adjacent":      {info(g, 2*mib, 2, 0), fext(g, 8192), fext(g+8192, 8192)},
		"info-overlap":  {info(g, 2*mib, 0, 0), info(g+mib, 2*mib, 0, 0)},
		"info-flags":    {info(g, 2*mib, 0, 6)},
		"info-short":    {{disk.Key{ObjectID: g, Type: disk.FreeSpaceInfoKey, Offset: mib}, []byte{1}}},
		"zero-length":   {info(g, 0, 0, 0)},
		"wrapping-item": {info(g, 2*mib, 1, 0), fext(g, ^uint64(0))},
	}
	for name, items := range bad {
		if _, err := alloc.LoadFreeSpaceTree(leafOf(t, items...), root, synthSector); !errors.Is(err, disk.ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
}

func bgItem(start, length, used, flags uint64) item {
	b := make([]byte, disk.BlockGroupItemSize)
	it := disk.BlockGroupItem{Used: used, ChunkObjectID: disk.FirstChunkTreeObjectID, Flags: flags}
	it.Encode(b)
	return item{disk.Key{ObjectID: disk.ObjectID(start), Type: disk.BlockGroupItemKey, Offset: length}, b}
}

func extItem(start, length uint64) item {
	return item{disk.Key{ObjectID: disk.ObjectID(start), Type: disk.ExtentItemKey, Offset: length}, make([]byte, 24)}
}

func metaItem(start uint64) item {
	return item{disk.Key{ObjectID: disk.ObjectID(start), Type: disk.MetadataItemKey}, make([]byte, 24)}
}

// synthMap builds a chunk map of single-stripe chunks {logical, length,
// type}, each identity-mapped onto device 1 (physical = logical), so a
// chunk covering physical 64 MiB holds the first superblock mirror.
func synthMap(t *testing.T, chunks ...[3]uint64) *chunk.Map {
	t.Helper()
	m := chunk.NewMap(synthSector)
	for _, c := range chunks {
		it := &disk.ChunkItem{Length: c[1], Owner: disk.ExtentTreeObjectID, StripeLen: 65536, Type: c[2],
			IOAlign: synthSector, IOWidth: synthSector, SectorSize: synthSector, NumStripes: 1,
			Stripes: []disk.Stripe{{DevID: 1, Offset: disk.PhysicalAddr(c[0])}}}
		if err := m.Add(disk.LogicalAddr(c[0]), it); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func TestLoadSynthetic(t *testing.T) {
	// Metadata chunk [60 MiB, 68 MiB) identity-mapped: physical 64 MiB (the
	// first superblock mirror) lies inside it at logical 64 MiB.
	meta := [3]uint64{60 * mib, 8 * mib, disk.BlockGroupMetadata}
	data := [3]uint64{mib, 8 * mib, disk.BlockGroupData}
	m := synthMap(t, data, meta)
	root := ctree.Root{Owner: disk.ExtentTreeObjectID}
	good := []item{
		extItem(mib, 8192), bgItem(mib, 8*mib, 8192+4096, disk.BlockGroupData), extItem(mib+65536, 4096),
		metaItem(60 * mib), bgItem(60*mib, 8*mib, 2*synthNode, disk.BlockGroupMetadata), metaItem(64*mib + 65536),
	}
	s, err := alloc.Load(leafOf(t, good...), root, m, synthNode, synthSector)
	if err != nil {
		t.Fatal(err)
	}
	gs := s.Groups()
	if len(gs) != 2 {
		t.Fatalf("%d groups", len(gs))
	}
	if got := gs[0].Free.Ranges(); len(got) != 2 || got[0] != (alloc.Range{Start: mib + 8192, End: mib + 65536}) {
		t.Fatalf("data free %v", got)
	}
	if got := gs[1].Excluded.Ranges(); len(got) != 1 || got[0] != (alloc.Range{Start: 64 * mib, End: 64*mib + 65536}) {
		t.Fatalf("metadata excluded %v", got)
	}
	view := s.FreeSpaceTreeView(gs[1])
	if got := view.Ranges(); len(got) != 2 || got[0] != (alloc.Range{Start: 60*mib + synthNode, End: 64*mib + 65536}) {
		t.Fatalf("metadata FST view %v", got)
	}
	// Exhaust metadata: the excluded range is never handed out.
	for {
		a, err := s.Alloc(disk.BlockGroupMetadata, synthNode, synthNode)
		if errors.Is(err, alloc.ErrNoSpace) {
			break
		}
		if a+synthNode > 64*mib && a < 64*mib+65536 {
			t.Fatalf("allocated %d inside the superblock exclusion", a)
		}
	}
	if _, err := s.Alloc(disk.BlockGroupData|disk.BlockGroupMetadata, 4096, 0); err == nil {
		t.Fatal("Alloc of two types accepted")
	}
	if _, err := s.Alloc(disk.BlockGroupData, 100, 0); err == nil {
		t.Fatal("Alloc of a partial sector accepted")
	}
	if err := s.Free(mib+8192, 4096); err == nil {
		t.Fatal("Free of free space accepted")
	}
	if err := s.Free(200*mib, 4096); err == nil {
		t.Fatal("Free outside every group accepted")
	}

	bad := map[string]struct {
		items []item
		m     *chunk.Map
	}{
		"overlap":       {[]item{bgItem(mib, 8*mib, 0, 1), extItem(mib, 8192), extItem(mib+4096, 4096)}, synthMap(t, data)},
		"outside":       {[]item{bgItem(mib, 8*mib, 0, 1), extItem(20*mib, 4096)}, synthMap(t, data)},
		"straddle":      {[]item{bgItem(mib, 8*mib, 0, 1), extItem(9*mib-4096, 8192)}, synthMap(t, data)},
		"zero-extent":   {[]item{bgItem(mib, 8*mib, 0, 1), extItem(2*mib, 0)}, synthMap(t, data)},
		"no-chunk":      {[]item{bgItem(mib, 8*mib, 0, 1)}, synthMap(t, meta)},
		"chunk-size":    {[]item{bgItem(mib, 4*mib, 0, 1)}, synthMap(t, data)},
		"chunk-type":    {[]item{bgItem(mib, 8*mib, 0, 4)}, synthMap(t, data)},
		"missing-group": {[]item{bgItem(mib, 8*mib, 0, 1)}, synthMap(t, data, meta)},
		"used":          {[]item{bgItem(mib, 8*mib, 9*mib, 1)}, synthMap(t, data)},
		"short-bg":      {[]item{{disk.Key{ObjectID: mib, Type: disk.BlockGroupItemKey, Offset: 8 * mib}, []byte{1}}}, synthMap(t, data)},
	}
	for name, tc := range bad {
		if _, err := alloc.Load(leafOf(t, tc.items...), root, tc.m, synthNode, synthSector); !errors.Is(err, disk.ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
		// Loaded lazily, the damage shows at the latest when the group
		// it is in is loaded; an extent item outside every group is never
		// met (nothing is allocated there).
		if name == "outside" {
			continue
		}
		lazy, err := alloc.LoadLazy(leafOf(t, tc.items...), root, root, nil, tc.m, synthNode, synthSector)
		if err == nil {
			err = lazy.LoadAll()
		}
		if !errors.Is(err, disk.ErrCorrupt) {
			t.Errorf("%s, lazily: err %v, want ErrCorrupt", name, err)
		}
	}
}

// TestLoadLazySynthetic loads the good image of TestLoadSynthetic lazily:
// no group is loaded at first, their FreeBytes are right already, and an
// allocation loads only the group it takes from.
func TestLoadLazySynthetic(t *testing.T) {
	meta := [3]uint64{60 * mib, 8 * mib, disk.BlockGroupMetadata}
	data := [3]uint64{mib, 8 * mib, disk.BlockGroupData}
	m := synthMap(t, data, meta)
	root := ctree.Root{Owner: disk.ExtentTreeObjectID}
	good := []item{
		extItem(mib, 8192), bgItem(mib, 8*mib, 8192+4096, disk.BlockGroupData), extItem(mib+65536, 4096),
		metaItem(60 * mib), bgItem(60*mib, 8*mib, 2*synthNode, disk.BlockGroupMetadata), metaItem(64*mib + 65536),
	}
	eager, err := alloc.Load(leafOf(t, good...), root, m, synthNode, synthSector)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := alloc.LoadLazy(leafOf(t, good...), root, root, nil, m, synthNode, synthSector)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range lazy.Groups() {
		if g.Loaded() {
			t.Fatalf("group %d loaded at open", g.Start)
		}
		if got, want := lazy.FreeBytes(g), eager.Groups()[i].Free.Bytes(); got != want {
			t.Errorf("group %d: FreeBytes %d before loading, %d loaded", g.Start, got, want)
		}
	}
	a, err := lazy.Alloc(disk.BlockGroupMetadata, synthNode, synthNode)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := eager.Alloc(disk.BlockGroupMetadata, synthNode, synthNode); a != b {
		t.Fatalf("lazy Alloc %d, eager %d", a, b)
	}
	if lazy.Groups()[0].Loaded() || !lazy.Groups()[1].Loaded() {
		t.Fatal("a metadata allocation loaded the data group, or not its own")
	}
	if err := lazy.Free(mib+65536, 4096); err != nil {
		t.Fatal(err)
	}
	if err := lazy.LoadAll(); err != nil {
		t.Fatal(err)
	}
	if err := eager.Free(mib+65536, 4096); err != nil {
		t.Fatal(err)
	}
	for i, g := range lazy.Groups() {
		e := eager.Groups()[i]
		if !g.Free.Equal(&e.Free) || !g.Excluded.Equal(&e.Excluded) || g.Used != e.Used {
			t.Errorf("group %d: lazy free %v excluded %v used %d, eager %v %v %d", g.Start,
				g.Free.Ranges(), g.Excluded.Ranges(), g.Used, e.Free.Ranges(), e.Excluded.Ranges(), e.Used)
		}
	}
}

// FuzzFreeSpaceTree feeds arbitrary leaves of free-space items: decoding
// must never panic, and what it accepts must be consistent.
func FuzzFreeSpaceTree(f *testing.F) {
	f.Add([]byte{198, 0, 16, 0, 2, 1, 0, 0, 0, 199, 0, 16, 0, 1})
	f.Add([]byte{198, 0, 16, 0, 2, 3, 0, 0, 1, 200, 0, 16, 0, 1, 200, 0, 17, 0, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		var items []item
		for len(in) >= 5 && len(items) < 100 {
			k := disk.Key{Type: disk.KeyType(in[0]), ObjectID: disk.ObjectID(binary.BigEndian.Uint16(in[1:])) * 4096 * 16,
				Offset: uint64(binary.BigEndian.Uint16(in[3:])) * 4096 * 16}
			in = in[5:]
			var data []byte
			switch k.Type {
			case disk.FreeSpaceInfoKey:
				if len(in) >= 4 {
					data = []byte{in[0], in[1], in[2], in[3] & 1, 0, 0, 0, 0}[:4+min(4, int(in[3]>>1))]
					in = in[4:]
				}
			case disk.FreeSpaceBitmapKey:
				n := int(disk.FreeSpaceBitmapSize(k.Offset, synthSector))
				if len(in) > 0 && in[0]&1 == 1 {
					n /= 2
				}
				data = make([]byte, min(n, 2048))
				copy(data, in)
			}
			items = append(items, item{k, data})
		}
		l, ok := makeLeaf(items)
		if !ok {
			return
		}
		fst, err := alloc.LoadFreeSpaceTree(l, ctree.Root{}, synthSector)
		if err != nil {
			if !errors.Is(err, disk.ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		for _, g := range fst.Groups {
			if uint64(g.Free.Len()) != uint64(g.Info.ExtentCount) || g.Free.Bytes() > g.Length {
				t.Fatalf("accepted inconsistent group %+v", g)
			}
		}
	})
}

// TestLoadLazyStraddleFromBefore: an extent item of one group reaching
// into the next is damage the next group's load finds by itself, with the
// group it starts in never loaded.
func TestLoadLazyStraddleFromBefore(t *testing.T) {
	data := [3]uint64{mib, 8 * mib, disk.BlockGroupData}
	meta := [3]uint64{9 * mib, 8 * mib, disk.BlockGroupMetadata}
	m := synthMap(t, data, meta)
	root := ctree.Root{Owner: disk.ExtentTreeObjectID}
	items := []item{
		bgItem(mib, 8*mib, 8192, disk.BlockGroupData), extItem(9*mib-4096, 8192),
		bgItem(9*mib, 8*mib, 0, disk.BlockGroupMetadata),
	}
	s, err := alloc.LoadLazy(leafOf(t, items...), root, root, nil, m, synthNode, synthSector)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoadGroup(s.Groups()[1]); !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("load of the group an extent reaches into: %v, want ErrCorrupt", err)
	}
	if _, err := s.Alloc(disk.BlockGroupMetadata, synthNode, synthNode); !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("Alloc there: %v, want ErrCorrupt", err)
	}
}
