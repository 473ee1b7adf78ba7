package disk

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// randName returns 0..max random bytes, nil when empty (decoders return
// empty names as empty, which EquateEmpty treats alike).
func randName(r *rand.Rand, max int) []byte { return randBytes(r, r.IntN(max+1)) }

func randKey(r *rand.Rand) Key {
	return Key{ObjectID: ObjectID(r.Uint64()), Type: KeyType(r.Uint32()), Offset: r.Uint64()}
}

func randInlineRef(r *rand.Rand) InlineRef {
	types := []KeyType{TreeBlockRefKey, SharedBlockRefKey, ExtentDataRefKey, SharedDataRefKey, ExtentOwnerRefKey}
	ref := InlineRef{Type: types[r.IntN(len(types))]}
	switch ref.Type {
	case ExtentDataRefKey:
		ref.Data = ExtentDataRef{Root: ObjectID(r.Uint64()), ObjectID: ObjectID(r.Uint64()), Offset: r.Uint64(), Count: r.Uint32()}
	case SharedDataRefKey:
		ref.Offset, ref.Count = r.Uint64(), r.Uint32()
	default:
		ref.Offset = r.Uint64()
	}
	return ref
}

// randPayloads returns random values of every variable-size payload type
// (and a few fixed ones whose decode depends on a mode flag).
func randPayloads(r *rand.Rand) []codec {
	var refs InodeRefs
	var extrefs InodeExtrefs
	var dirs DirItems
	for range r.IntN(5) {
		refs = append(refs, InodeRef{Index: r.Uint64(), Name: randName(r, 40)})
		extrefs = append(extrefs, InodeExtref{Parent: ObjectID(r.Uint64()), Index: r.Uint64(), Name: randName(r, 40)})
		dirs = append(dirs, DirItem{Location: randKey(r), TransID: Generation(r.Uint64()),
			Type: FileType(r.Uint32()), Name: randName(r, 40), Data: randName(r, 60)})
	}
	ext := &ExtentItem{Refs: r.Uint64(), Generation: Generation(r.Uint64()), Flags: ExtentFlagData}
	if r.IntN(2) == 0 {
		ext.Flags = ExtentFlagTreeBlock | ExtentFlags(r.Uint64()&uint64(ExtentFlagFullBackref))
		ext.TreeBlock = &TreeBlockInfo{Key: randKey(r), Level: uint8(r.Uint32())}
	}
	for range r.IntN(6) {
		ext.InlineRefs = append(ext.InlineRefs, randInlineRef(r))
	}
	chunk := &ChunkItem{Length: r.Uint64(), Owner: ExtentTreeObjectID, StripeLen: StripeLen, Type: r.Uint64(),
		IOAlign: r.Uint32(), IOWidth: r.Uint32(), SectorSize: r.Uint32(), SubStripes: uint16(r.Uint32())}
	for range 1 + r.IntN(4) {
		var u UUID
		copy(u[:], randBytes(r, 16))
		chunk.Stripes = append(chunk.Stripes, Stripe{DevID: DevID(r.Uint64()), Offset: PhysicalAddr(r.Uint64()), DevUUID: u})
	}
	chunk.NumStripes = uint16(len(chunk.Stripes))
	var uuids UUIDItem
	var drefs ExtentDataRefs
	for range r.IntN(4) {
		uuids = append(uuids, ObjectID(r.Uint64()))
		drefs = append(drefs, ExtentDataRef{Root: ObjectID(r.Uint64()), ObjectID: ObjectID(r.Uint64()), Offset: r.Uint64(), Count: r.Uint32()})
	}
	legacyRoot := &RootItem{Generation: Generation(r.Uint64()), Bytenr: LogicalAddr(r.Uint64()), Level: uint8(r.Uint32()),
		DropProgress: randKey(r), Refs: r.Uint32(), Legacy: true}
	legacyRoot.Inode.Mode = r.Uint32()
	csum, bitmap, str, raw := CsumItem(randName(r, 64)), FreeSpaceBitmap(randName(r, 64)), StringItem(randName(r, 20)), RawItem(randName(r, 20))
	return []codec{
		&refs, &extrefs, &dirs, ext, chunk, &uuids, &drefs, legacyRoot, &csum, &bitmap, &str, &raw,
		&FileExtentItem{Generation: Generation(r.Uint64()), RAMBytes: r.Uint64(), Compression: CompressionType(r.Uint32()),
			Type: FileExtentInline, InlineData: randName(r, 100)},
		&FileExtentItem{Generation: Generation(r.Uint64()), RAMBytes: r.Uint64(), Type: FileExtentPrealloc,
			DiskBytenr: LogicalAddr(r.Uint64()), DiskNumBytes: r.Uint64(), Offset: r.Uint64(), NumBytes: r.Uint64()},
		&RootRef{DirID: ObjectID(r.Uint64()), Sequence: r.Uint64(), Name: randName(r, 255)},
		&QgroupStatusItem{Version: 1, Generation: Generation(r.Uint64()), Flags: r.Uint64(), Rescan: r.Uint64(), Legacy: true},
		&QgroupStatusItem{Version: 1, Generation: Generation(r.Uint64()), EnableGen: Generation(r.Uint64())},
		&EmptyItem{},
	}
}

// TestRoundTripValues checks Decode(Encode(x)) == x for random values of
// every variable-size payload.
func TestRoundTripValues(t *testing.T) {
	r := testRand(t)
	for range 200 {
		for _, want := range randPayloads(r) {
			b := EncodePayload(want)
			got := newLike(want)
			if err := got.Decode(b); err != nil {
				t.Fatalf("%T: decode of own encoding: %v", want, err)
			}
			if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("%T round trip (-want +got):\n%s", want, d)
			}
		}
	}
}

// newLike returns a zero value of the same type as p.
func newLike(p codec) codec {
	switch p.(type) {
	case *InodeRefs:
		return new(InodeRefs)
	case *InodeExtrefs:
		return new(InodeExtrefs)
	case *DirItems:
		return new(DirItems)
	case *ExtentItem:
		return new(ExtentItem)
	case *ChunkItem:
		return new(ChunkItem)
	case *UUIDItem:
		return new(UUIDItem)
	case *ExtentDataRefs:
		return new(ExtentDataRefs)
	case *RootItem:
		return new(RootItem)
	case *CsumItem:
		return new(CsumItem)
	case *FreeSpaceBitmap:
		return new(FreeSpaceBitmap)
	case *StringItem:
		return new(StringItem)
	case *RawItem:
		return new(RawItem)
	case *FileExtentItem:
		return new(FileExtentItem)
	case *RootRef:
		return new(RootRef)
	case *QgroupStatusItem:
		return new(QgroupStatusItem)
	case *EmptyItem:
		return new(EmptyItem)
	}
	panic("newLike: unhandled type")
}

// TestRoundTripFixedValues checks Decode(Encode(x)) == x for the
// fixed-size structs filled with random field values.
func TestRoundTripFixedValues(t *testing.T) {
	r := testRand(t)
	for _, s := range fixedStructs() {
		for range 20 {
			b := randBytes(r, s.size)
			s.fixup(b)
			x := s.zero()
			if err := x.Decode(b); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			y := s.zero()
			if err := y.Decode(EncodePayload(x)); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if d := cmp.Diff(x, y, cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("%s (-want +got):\n%s", s.name, d)
			}
		}
	}
}

// TestDecodeItemTypes checks that DecodeItem picks the payload type by key.
func TestDecodeItemTypes(t *testing.T) {
	cases := []struct {
		k    Key
		data []byte
		want Payload
	}{
		{Key{256, InodeItemKey, 0}, make([]byte, 160), &InodeItem{}},
		{Key{256, DirIndexKey, 2}, nil, &DirItems{}},
		{Key{BalanceObjectID, TemporaryItemKey, 0}, make([]byte, 448), &BalanceItem{}},
		{Key{5, TemporaryItemKey, 0}, []byte{1}, &RawItem{1}},
		{Key{DevStatsObjectID, PersistentItemKey, 1}, make([]byte, 40), &DevStatsItem{}},
		{Key{257, VerityDescItemKey, 0}, make([]byte, 25), &VerityDescItem{}},
		{Key{257, VerityDescItemKey, 1}, []byte{7}, &RawItem{7}},
		{Key{4096, MetadataItemKey, 0}, make([]byte, 24), &ExtentItem{InlineRefs: []InlineRef{}}},
		{Key{4096, TreeBlockRefKey, 5}, nil, &EmptyItem{}},
		{Key{1, 99, 0}, []byte{1, 2}, &RawItem{1, 2}},
	}
	for _, c := range cases {
		got, err := DecodeItem(c.k, c.data)
		if err != nil {
			t.Errorf("%v: %v", c.k, err)
			continue
		}
		if d := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%v (-want +got):\n%s", c.k, d)
		}
	}
}
