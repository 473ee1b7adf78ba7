package disk

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// seedItems returns valid items of every payload type, used as fuzz seeds.
func seedItems() []testItem {
	a := ExtentDataRef{Root: 5, ObjectID: 257, Count: 1}
	items := append(fsLeafItems(),
		testItem{Key{257, InodeExtrefKey, ExtrefHash(256, []byte("x"))}, enc(&InodeExtrefs{{Parent: 256, Index: 3, Name: []byte("x")}})},
		testItem{Key{257, ExtentDataKey, 0}, enc(&FileExtentItem{Generation: 5, RAMBytes: 3, InlineData: []byte("hi\n")})},
		testItem{Key{FSTreeObjectID, RootItemKey, 0}, enc(&RootItem{Generation: 5, RootDirID: 256, Bytenr: 1 << 24, Refs: 1})},
		testItem{Key{FSTreeObjectID, RootItemKey, 0}, enc(&RootItem{Generation: 5, Legacy: true})},
		testItem{Key{5, RootRefKey, 256}, enc(&RootRef{DirID: 256, Sequence: 7, Name: []byte("sv")})},
		testItem{Key{1 << 20, MetadataItemKey, 0}, enc(&ExtentItem{Refs: 1, Generation: 5, Flags: ExtentFlagTreeBlock,
			InlineRefs: []InlineRef{{Type: TreeBlockRefKey, Offset: 5}}})},
		testItem{Key{1 << 20, ExtentItemKey, 16384}, enc(&ExtentItem{Refs: 2, Generation: 5, Flags: ExtentFlagTreeBlock | ExtentFlagFullBackref,
			TreeBlock: &TreeBlockInfo{Level: 1}, InlineRefs: []InlineRef{{Type: SharedBlockRefKey, Offset: 1 << 21}, {Type: SharedBlockRefKey, Offset: 1 << 20}}})},
		testItem{Key{1 << 20, ExtentItemKey, 4096}, enc(&ExtentItem{Refs: 3, Generation: 5, Flags: ExtentFlagData,
			InlineRefs: []InlineRef{{Type: ExtentOwnerRefKey, Offset: 5}, {Type: ExtentDataRefKey, Data: a}, {Type: SharedDataRefKey, Offset: 1 << 22, Count: 2}}})},
		testItem{Key{1 << 20, TreeBlockRefKey, 5}, nil},
		testItem{Key{1 << 20, SharedDataRefKey, 1 << 21}, enc(&SharedDataRef{Count: 1})},
		testItem{Key{1 << 20, ExtentDataRefKey, a.Hash()}, enc(&ExtentDataRefs{a})},
		testItem{Key{ExtentCsumObjectID, ExtentCsumKey, 1 << 20}, make([]byte, 12)},
		testItem{Key{1 << 20, BlockGroupItemKey, 8 << 20}, enc(&BlockGroupItem{Used: 4096, ChunkObjectID: 256, Flags: BlockGroupData})},
		testItem{Key{FirstChunkTreeObjectID, ChunkItemKey, 1 << 20}, enc(&ChunkItem{Length: 8 << 20, Owner: 2, StripeLen: StripeLen,
			Type: BlockGroupMetadata | BlockGroupDUP, SectorSize: 4096, SubStripes: 1, Stripes: []Stripe{{DevID: 1, Offset: 1 << 20}, {DevID: 1, Offset: 9 << 20}}})},
		testItem{Key{DevItemsObjectID, DevItemKey, 1}, enc(&DevItem{DevID: 1, TotalBytes: 1 << 30})},
		testItem{Key{1, DevExtentKey, 1 << 20}, enc(&DevExtent{ChunkTree: 3, ChunkObjectID: 256, ChunkOffset: 1 << 20, Length: 8 << 20})},
		testItem{Key{1 << 20, FreeSpaceInfoKey, 8 << 20}, enc(&FreeSpaceInfo{ExtentCount: 1, Flags: FreeSpaceUsingBitmaps})},
		testItem{Key{1 << 20, FreeSpaceBitmapKey, 64 << 12}, make([]byte, 8)},
		testItem{Key{1, UUIDKeySubvol, 2}, enc(&UUIDItem{5, 256})},
		testItem{Key{0, QgroupStatusKey, 0}, enc(&QgroupStatusItem{Version: 1, Flags: QgroupStatusOn})},
		testItem{Key{0, QgroupInfoKey, 5}, enc(&QgroupInfoItem{Rfer: 4096})},
		testItem{Key{0, QgroupLimitKey, 5}, enc(&QgroupLimitItem{Flags: QgroupLimitMaxRfer, MaxRfer: 1 << 20})},
		testItem{Key{DevStatsObjectID, PersistentItemKey, 1}, enc(&DevStatsItem{ReadErrs: 1})},
		testItem{Key{0, DevReplaceKey, 0}, enc(&DevReplaceItem{SrcDevID: 1})},
		testItem{Key{BalanceObjectID, TemporaryItemKey, 0}, enc(&BalanceItem{Flags: BalanceData})},
		testItem{Key{257, VerityDescItemKey, 0}, enc(&VerityDescItem{DescSize: 256})},
		testItem{Key{OrphanObjectID, OrphanItemKey, 257}, nil},
	)
	return items
}

// checkedExactly lists the types for which CheckItem fixes the item size, so
// an item that passes it must decode and re-encode to exactly its bytes.
var checkedExactly = map[KeyType]bool{
	InodeItemKey: true, InodeRefKey: true, InodeExtrefKey: true, DirItemKey: true, DirIndexKey: true,
	XattrItemKey: true, ExtentDataKey: true, ExtentCsumKey: true, RootItemKey: true, RootRefKey: true,
	RootBackrefKey: true, ExtentItemKey: true, MetadataItemKey: true, TreeBlockRefKey: true,
	SharedBlockRefKey: true, SharedDataRefKey: true, ExtentDataRefKey: true, BlockGroupItemKey: true,
	ChunkItemKey: true, DevItemKey: true, DevExtentKey: true, FreeSpaceInfoKey: true,
	FreeSpaceExtentKey: true, FreeSpaceBitmapKey: true, UUIDKeySubvol: true, UUIDKeyReceivedSubvol: true,
}

// FuzzDecodeItems: decoding any (key, bytes) never panics and fails only
// with ErrCorrupt; a successful decode re-encodes to a prefix of the input
// (all of it for items CheckItem accepts).
func FuzzDecodeItems(f *testing.F) {
	for _, it := range seedItems() {
		f.Add(uint8(it.key.Type), uint64(it.key.ObjectID), it.key.Offset, it.data)
		if len(it.data) > 0 {
			f.Add(uint8(it.key.Type), uint64(it.key.ObjectID), it.key.Offset, it.data[:len(it.data)-1])
		}
	}
	f.Fuzz(func(t *testing.T, typ uint8, objectid, offset uint64, data []byte) {
		k := Key{ObjectID(objectid), KeyType(typ), offset}
		p, err := DecodeItem(k, data)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v: error does not wrap ErrCorrupt: %v", k, err)
		}
		var out []byte
		if err == nil {
			out = EncodePayload(p)
			if len(out) > len(data) || !bytes.Equal(out, data[:len(out)]) {
				t.Fatalf("%v: re-encoding differs:\n in %x\nout %x", k, data, out)
			}
		}
		cerr := CheckItem(k, data, checkParams)
		if cerr != nil {
			var ce *CorruptError
			if !errors.As(cerr, &ce) || ce.Key == nil {
				t.Fatalf("%v: check error without key: %v", k, cerr)
			}
			return
		}
		if checkedExactly[k.Type] && (err != nil || len(out) != len(data)) {
			t.Fatalf("%v: passes CheckItem but decode err %v, re-encodes %d of %d bytes", k, err, len(out), len(data))
		}
	})
}

// FuzzNodeCheck: Node.Check and CheckLeafItems never panic on any block,
// with the stored checksum and with a freshly computed one.
func FuzzNodeCheck(f *testing.F) {
	leaf := buildLeaf(f, 4096, 1<<22, 5, fsLeafItems()[:6])
	f.Add([]byte(leaf))
	var ext []testItem
	for _, it := range seedItems() {
		if it.key.Type == MetadataItemKey || it.key.Type == ExtentItemKey || it.key.Type == BlockGroupItemKey {
			ext = append(ext, it)
		}
	}
	f.Add([]byte(buildLeaf(f, 4096, 1<<22, ExtentTreeObjectID, ext[1:])))
	node := make([]byte, 4096)
	(&Header{Bytenr: 1 << 22, Flags: DefaultHeaderFlags, Generation: 5, Owner: 5, NumItems: 2, Level: 1}).Encode(node)
	PutKeyPtr(node, 0, KeyPtr{Key: Key{256, InodeItemKey, 0}, BlockPtr: 1 << 23, Generation: 5})
	PutKeyPtr(node, 1, KeyPtr{Key: Key{300, InodeItemKey, 0}, BlockPtr: 1 << 24, Generation: 5})
	CsumCRC32C.SumBlock(node)
	f.Add(node)
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize))
	r := rand.New(rand.NewPCG(1, 2))
	f.Add(randBytes(r, 4096))
	f.Fuzz(func(t *testing.T, block []byte) {
		n := Node(block)
		p := BlockParams{NodeSize: len(block), CsumType: CsumCRC32C, SuperGen: 10}
		e := Expect{Level: -1}
		if len(block) >= HeaderSize+KeySize {
			p.FSID = n.Header().FSID
			e.Bytenr = n.Bytenr()
			k := KeyAt(block[HeaderSize:])
			e.FirstKey = &k
		}
		ip := ItemCheckParams{SectorSize: 4096, NodeSize: uint32(len(block)), CsumType: CsumCRC32C, SuperGen: 10}
		_ = n.Check(p, e)
		_ = CheckLeafItems(n, ip)
		if len(block) >= CsumFieldSize {
			n = append(Node{}, block...) // the fuzzer's input must not change
			CsumCRC32C.SumBlock(n)
			_ = n.Check(p, e)
			_ = CheckLeafItems(n, ip)
		}
	})
}

// leafFromBytes splits fuzz input into items: each is a type byte, objectid
// and offset bytes, a length byte and that many data bytes. Keys are made
// increasing by adding the previous key, so neighbour rules get exercised.
func leafFromBytes(b []byte) []testItem {
	var items []testItem
	var prev Key
	for len(b) >= 4 && len(items) < 40 {
		k := Key{ObjectID: prev.ObjectID + ObjectID(b[1]), Type: KeyType(b[0]), Offset: prev.Offset + uint64(b[2])<<12}
		if k.ObjectID == prev.ObjectID && k.Type <= prev.Type && len(items) > 0 {
			k.Type = prev.Type
			k.Offset = prev.Offset + 1 + uint64(b[2])<<12
		}
		if len(items) > 0 && !prev.Less(k) {
			break
		}
		n := min(int(b[3]), len(b)-4)
		items = append(items, testItem{k, b[4 : 4+n]})
		prev, b = k, b[4+n:]
	}
	return items
}

// FuzzCheckLeafItems: CheckLeafItems never panics on well-laid-out leaves
// holding arbitrary items, and its errors carry the offending key.
func FuzzCheckLeafItems(f *testing.F) {
	for _, items := range [][]testItem{fsLeafItems(), seedItems()[9:12]} {
		var b []byte
		var prev Key
		for _, it := range items {
			if len(it.data) > 255 {
				continue
			}
			b = append(b, byte(it.key.Type), byte(it.key.ObjectID-prev.ObjectID), 0, byte(len(it.data)))
			b = append(b, it.data...)
			prev = it.key
		}
		f.Add(uint64(5), b)
	}
	f.Fuzz(func(t *testing.T, owner uint64, b []byte) {
		items := leafFromBytes(b)
		n := buildLeaf(t, 16384, 1<<22, ObjectID(owner), items)
		p := checkParams
		p.Tree = 0 // from the header owner
		if err := CheckLeafItems(n, p); err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Key == nil {
				t.Fatalf("leaf check error without key: %v", err)
			}
		}
	})
}
