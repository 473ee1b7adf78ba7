package disk

import (
	"bytes"
	"errors"
	"testing"
)

var checkParams = ItemCheckParams{SectorSize: 4096, NodeSize: 16384, CsumType: CsumCRC32C, SuperGen: 5, Tree: FSTreeObjectID}

// checkCase is one item and whether CheckItem must accept it.
type checkCase struct {
	name string
	k    Key
	data []byte
	ok   bool
}

// edit returns a copy of b changed by f.
func edit(b []byte, f func(b []byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	return c
}

func runCheckCases(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		err := CheckItem(c.k, c.data, checkParams)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: rejected: %v", c.name, err)
		case !c.ok && err == nil:
			t.Errorf("%s: accepted", c.name)
		case err != nil:
			if testing.Verbose() {
				t.Logf("%s: %v", c.name, err)
			}
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Key == nil || *ce.Key != c.k || ce.What == "" {
				t.Errorf("%s: error %#v lacks ErrCorrupt, key or description", c.name, err)
			}
		}
	}
}

func TestCheckInodeItems(t *testing.T) {
	ino := enc(&InodeItem{Generation: 5, TransID: 6, NLink: 1, Mode: ModeRegular | 0o644, Flags: InodeNoDataSum | InodeROVerity})
	dir := enc(&InodeItem{Generation: 5, NLink: 2, Mode: ModeDir | 0o755})
	k := Key{257, InodeItemKey, 0}
	ref := enc(&InodeRefs{{Index: 2, Name: []byte("a")}, {Index: 3, Name: []byte("bb")}})
	extref := enc(&InodeExtrefs{{Parent: 256, Index: 2, Name: []byte("a")}})
	runCheckCases(t, []checkCase{
		{"inode", k, ino, true},
		{"root tree dir inode", Key{RootTreeDirObjectID, InodeItemKey, 0}, ino, true},
		{"inode key offset", Key{257, InodeItemKey, 1}, ino, false},
		{"inode objectid", Key{100, InodeItemKey, 0}, ino, false},
		{"inode size", k, ino[:159], false},
		{"inode generation", k, edit(ino, func(b []byte) { le.PutUint64(b, 7) }), false},
		{"inode transid", k, edit(ino, func(b []byte) { le.PutUint64(b[8:], 7) }), false},
		{"inode mode no type", k, edit(ino, func(b []byte) { le.PutUint32(b[0x34:], 0o644) }), false},
		{"inode mode bad bits", k, edit(ino, func(b []byte) { le.PutUint32(b[0x34:], 0o100644|1<<20) }), false},
		{"dir nlink 2", k, dir, false},
		{"inode unknown flag", k, edit(ino, func(b []byte) { b[0x40+2] |= 0x10 }), false},
		{"inode unknown ro flag", k, edit(ino, func(b []byte) { b[0x40+4] |= 2 }), false},
		{"inode ref", Key{257, InodeRefKey, 256}, ref, true},
		{"inode ref truncated", Key{257, InodeRefKey, 256}, ref[:len(ref)-1], false},
		{"inode ref empty item", Key{257, InodeRefKey, 256}, nil, false},
		{"inode ref empty name", Key{257, InodeRefKey, 256}, enc(&InodeRefs{{Index: 2}}), false},
		{"inode extref", Key{257, InodeExtrefKey, ExtrefHash(256, []byte("a"))}, extref, true},
		{"inode extref truncated", Key{257, InodeExtrefKey, 1}, extref[:17], false},
	})
}

func dirEntry(loc Key, ft FileType, name, data string) []byte {
	d := DirItem{Location: loc, TransID: 5, Type: ft, Name: []byte(name)}
	if data != "" {
		d.Data = []byte(data)
	}
	return enc(&DirItems{d})
}

func TestCheckDirItems(t *testing.T) {
	ino := Key{257, InodeItemKey, 0}
	h := func(s string) uint64 { return NameHash([]byte(s)) }
	long := string(bytes.Repeat([]byte("n"), 256))
	two := append(dirEntry(ino, FtRegular, "a", ""), dirEntry(Key{258, InodeItemKey, 0}, FtDir, "a", "")...)
	runCheckCases(t, []checkCase{
		{"dir item", Key{256, DirItemKey, h("a")}, dirEntry(ino, FtRegular, "a", ""), true},
		{"dir item two entries", Key{256, DirItemKey, h("a")}, two, true},
		{"dir item truncated", Key{256, DirItemKey, h("a")}, two[:len(two)-1], false},
		{"dir index", Key{256, DirIndexKey, 2}, dirEntry(ino, FtRegular, "a", ""), true},
		{"dir item hash", Key{256, DirItemKey, h("a") + 1}, dirEntry(ino, FtRegular, "a", ""), false},
		{"subvolume entry", Key{256, DirItemKey, h("sv")}, dirEntry(Key{256, RootItemKey, ^uint64(0)}, FtDir, "sv", ""), true},
		{"entry to a non-subvolume tree", Key{256, DirItemKey, h("sv")}, dirEntry(Key{7, RootItemKey, 0}, FtDir, "sv", ""), false},
		{"entry location type", Key{256, DirIndexKey, 2}, dirEntry(Key{257, ExtentDataKey, 0}, FtRegular, "a", ""), false},
		{"entry location objectid", Key{256, DirIndexKey, 2}, dirEntry(Key{3, InodeItemKey, 0}, FtRegular, "a", ""), false},
		{"entry location offset", Key{256, DirIndexKey, 2}, dirEntry(Key{257, InodeItemKey, 1}, FtRegular, "a", ""), false},
		{"entry type 9", Key{256, DirIndexKey, 2}, dirEntry(ino, 9, "a", ""), false},
		{"encrypted entry", Key{256, DirIndexKey, 2}, dirEntry(ino, FtRegular|FtEncrypted, "a", ""), true},
		{"entry type xattr", Key{256, DirIndexKey, 2}, dirEntry(ino, FtXattr, "a", ""), false},
		{"entry with data", Key{256, DirIndexKey, 2}, dirEntry(ino, FtRegular, "a", "x"), false},
		{"entry name 256", Key{256, DirItemKey, h(long)}, dirEntry(ino, FtRegular, long, ""), false},
		{"xattr", Key{257, XattrItemKey, h("user.a")}, dirEntry(Key{}, FtXattr, "user.a", "v"), true},
		{"xattr location", Key{257, XattrItemKey, h("user.a")}, dirEntry(ino, FtXattr, "user.a", "v"), false},
		{"xattr type", Key{257, XattrItemKey, h("user.a")}, dirEntry(Key{}, FtRegular, "user.a", "v"), false},
		{"xattr too big", Key{257, XattrItemKey, h("user.a")}, dirEntry(Key{}, FtXattr, "user.a", string(make([]byte, 16228))), false},
	})
}

func TestCheckFileExtents(t *testing.T) {
	inline := enc(&FileExtentItem{Generation: 5, RAMBytes: 6, Type: FileExtentInline, InlineData: []byte("hello\n")})
	reg := enc(&FileExtentItem{Generation: 5, RAMBytes: 8192, Type: FileExtentReg, DiskBytenr: 1 << 20, DiskNumBytes: 8192, Offset: 4096, NumBytes: 4096})
	zinline := enc(&FileExtentItem{Generation: 5, RAMBytes: 3000, Type: FileExtentInline, Compression: CompressZstd, InlineData: make([]byte, 500)})
	k0, k1 := Key{257, ExtentDataKey, 0}, Key{257, ExtentDataKey, 4096}
	put := func(off int, v uint64) func([]byte) { return func(b []byte) { le.PutUint64(b[off:], v) } }
	runCheckCases(t, []checkCase{
		{"inline", k0, inline, true},
		{"compressed inline", k0, zinline, true},
		{"inline not at 0", k1, inline, false},
		{"inline size", k0, inline[:26], false},
		{"inline a full sector", k0, enc(&FileExtentItem{RAMBytes: 4096, InlineData: make([]byte, 4096)}), false},
		{"compressed inline too big", k0, enc(&FileExtentItem{RAMBytes: 8192, Compression: CompressZlib, InlineData: make([]byte, 100)}), false},
		{"header only", k0, inline[:20], false},
		{"regular", k1, reg, true},
		{"hole", k1, enc(&FileExtentItem{Type: FileExtentReg, NumBytes: 1 << 20}), true},
		{"unaligned key", Key{257, ExtentDataKey, 100}, reg, false},
		{"regular size", k1, append(bytes.Clone(reg), 0), false},
		{"unaligned disk_bytenr", k1, edit(reg, put(0x15, 1<<20+1)), false},
		{"unaligned num_bytes", k1, edit(reg, put(0x2d, 100)), false},
		{"beyond ram_bytes", k1, edit(reg, put(0x25, 8192)), false},
		{"end overflow", Key{257, ExtentDataKey, 1 << 63}, edit(reg, put(0x2d, 1<<63)), false},
		{"type 3", k1, edit(reg, func(b []byte) { b[20] = 3 }), false},
		{"compression 4", k1, edit(reg, func(b []byte) { b[16] = 4 }), false},
		{"encryption", k1, edit(reg, func(b []byte) { b[17] = 1 }), false},
		{"compressed prealloc", k1, edit(reg, func(b []byte) { b[16], b[20] = 1, 2 }), false},
	})
}

func TestCheckRootItems(t *testing.T) {
	root := enc(&RootItem{Generation: 5, GenerationV2: 5, RootDirID: 256, Bytenr: 1 << 24, Refs: 1})
	legacy := enc(&RootItem{Generation: 5, Bytenr: 1 << 24, Refs: 1, Legacy: true})
	k := Key{FSTreeObjectID, RootItemKey, 0}
	ref := enc(&RootRef{DirID: 256, Sequence: 7, Name: []byte("sv")})
	runCheckCases(t, []checkCase{
		{"root item", k, root, true},
		{"legacy root item", k, legacy, true},
		{"root item size", k, root[:300], false},
		{"root id 0", Key{0, RootItemKey, 0}, root, false},
		{"reloc root of 0", Key{TreeRelocObjectID, RootItemKey, 0}, root, false},
		{"root generation", k, edit(root, func(b []byte) { le.PutUint64(b[0xa0:], 9) }), false},
		{"root generation_v2", k, edit(root, func(b []byte) { le.PutUint64(b[0xef:], 9) }), false},
		{"root bytenr", k, edit(root, func(b []byte) { le.PutUint64(b[0xb0:], 1<<24+512) }), false},
		{"root level", k, edit(root, func(b []byte) { b[0xee] = 8 }), false},
		{"root drop level", k, edit(root, func(b []byte) { b[0xed] = 8 }), false},
		{"root flags", k, edit(root, func(b []byte) { b[0xd0] = 2 }), false},
		{"dead root", k, edit(root, func(b []byte) { b[0xd0+6] = 1 }), true},
		{"root ref", Key{5, RootRefKey, 256}, ref, true},
		{"root backref", Key{256, RootBackrefKey, 5}, ref, true},
		{"root ref size", Key{5, RootRefKey, 256}, append(bytes.Clone(ref), 0), false},
		{"root ref short", Key{5, RootRefKey, 256}, ref[:17], false},
	})
}

func TestCheckExtentItems(t *testing.T) {
	tb := &ExtentItem{Refs: 1, Generation: 5, Flags: ExtentFlagTreeBlock, InlineRefs: []InlineRef{{Type: TreeBlockRefKey, Offset: 5}}}
	meta := enc(tb)
	tb.TreeBlock = &TreeBlockInfo{Level: 1}
	fat := enc(tb)
	a := InlineRef{Type: ExtentDataRefKey, Data: ExtentDataRef{Root: 5, ObjectID: 257, Count: 1}}
	b := InlineRef{Type: ExtentDataRefKey, Data: ExtentDataRef{Root: 5, ObjectID: 261, Count: 1}}
	data := enc(&ExtentItem{Refs: 2, Generation: 5, Flags: ExtentFlagData, InlineRefs: []InlineRef{a, b}})
	swapped := enc(&ExtentItem{Refs: 2, Generation: 5, Flags: ExtentFlagData, InlineRefs: []InlineRef{b, a}})
	shared := enc(&ExtentItem{Refs: 1, Generation: 5, Flags: ExtentFlagTreeBlock | ExtentFlagFullBackref,
		InlineRefs: []InlineRef{{Type: SharedBlockRefKey, Offset: 1<<20 + 1}}})
	km, kd := Key{1 << 20, MetadataItemKey, 0}, Key{1 << 20, ExtentItemKey, 8192}
	dref := enc(&ExtentDataRefs{a.Data})
	runCheckCases(t, []checkCase{
		{"metadata item", km, meta, true},
		{"non-skinny tree block", Key{1 << 20, ExtentItemKey, 16384}, fat, true},
		{"non-skinny length", Key{1 << 20, ExtentItemKey, 8192}, fat, false},
		{"non-skinny level", Key{1 << 20, ExtentItemKey, 16384}, edit(fat, func(b []byte) { b[24+17] = 8 }), false},
		{"metadata level", Key{1 << 20, MetadataItemKey, 8}, meta, false},
		{"unaligned extent", Key{1<<20 + 1, MetadataItemKey, 0}, meta, false},
		{"padding", km, append(bytes.Clone(meta), 0), false},
		{"truncated ref", km, meta[:30], false},
		{"unknown inline type", km, edit(meta, func(b []byte) { b[24] = 177 }), false},
		{"too many refs", km, edit(meta, func(b []byte) { b[0] = 0 }), false},
		{"generation", km, edit(meta, func(b []byte) { b[8] = 9 }), false},
		{"data and tree block", km, edit(meta, func(b []byte) { b[16] = 3 }), false},
		{"unknown extent flag", km, edit(meta, func(b []byte) { b[17] = 2 }), false},
		{"data extent", kd, data, true},
		{"data refs out of order", kd, swapped, false},
		{"data in metadata item", Key{1 << 20, MetadataItemKey, 0}, data, false},
		{"data full backref", kd, edit(data, func(b []byte) { b[17] = 1 }), false},
		{"data extent unaligned length", Key{1 << 20, ExtentItemKey, 100}, data, false},
		{"shared block ref unaligned", km, shared, false},
		{"tree block ref item", Key{1 << 20, TreeBlockRefKey, 5}, nil, true},
		{"tree block ref size", Key{1 << 20, TreeBlockRefKey, 5}, []byte{0}, false},
		{"shared block ref unaligned key", Key{1 << 20, SharedBlockRefKey, 5}, nil, false},
		{"shared data ref", Key{1 << 20, SharedDataRefKey, 1 << 21}, []byte{1, 0, 0, 0}, true},
		{"shared data ref size", Key{1 << 20, SharedDataRefKey, 1 << 21}, nil, false},
		{"extent data ref", Key{1 << 20, ExtentDataRefKey, a.Data.Hash()}, dref, true},
		{"extent data ref hash", Key{1 << 20, ExtentDataRefKey, a.Data.Hash() + 1}, dref, false},
		{"extent data ref size", Key{1 << 20, ExtentDataRefKey, a.Data.Hash()}, dref[:27], false},
	})
}

func TestCheckAllocationItems(t *testing.T) {
	bg := enc(&BlockGroupItem{Used: 4096, ChunkObjectID: 256, Flags: BlockGroupMetadata | BlockGroupDUP})
	kbg := Key{1 << 20, BlockGroupItemKey, 8 << 20}
	bgFlags := func(f uint64) []byte { return edit(bg, func(b []byte) { le.PutUint64(b[16:], f) }) }
	chunk := enc(&ChunkItem{Length: 8 << 20, Owner: 2, StripeLen: StripeLen, Type: BlockGroupData, SectorSize: 4096, SubStripes: 1,
		Stripes: []Stripe{{DevID: 1, Offset: 1 << 20}}})
	kc := Key{FirstChunkTreeObjectID, ChunkItemKey, 1 << 20}
	dev := enc(&DevItem{DevID: 1, TotalBytes: 1 << 30, BytesUsed: 1 << 20})
	de := enc(&DevExtent{ChunkTree: 3, ChunkObjectID: 256, ChunkOffset: 1 << 20, Length: 8 << 20})
	kde := Key{1, DevExtentKey, 1 << 20}
	runCheckCases(t, []checkCase{
		{"block group", kbg, bg, true},
		{"mixed block group", kbg, bgFlags(BlockGroupData | BlockGroupMetadata), true},
		{"block group size", kbg, bg[:23], false},
		{"block group length 0", Key{1 << 20, BlockGroupItemKey, 0}, bg, false},
		{"block group used", Key{1 << 20, BlockGroupItemKey, 4095}, bg, false},
		{"block group chunk objectid", kbg, edit(bg, func(b []byte) { b[8] = 1 }), false},
		{"block group two profiles", kbg, bgFlags(BlockGroupData | BlockGroupDUP | BlockGroupRAID1), false},
		{"block group system+data", kbg, bgFlags(BlockGroupData | BlockGroupSystem), false},
		{"block group no type", kbg, bgFlags(BlockGroupDUP), false},
		{"block group unknown bit", kbg, bgFlags(BlockGroupData | 1<<20), false},
		{"chunk", kc, chunk, true},
		{"chunk size", kc, append(bytes.Clone(chunk), 0), false},
		{"chunk stripe len", kc, edit(chunk, func(b []byte) { b[16] = 1 }), false},
		{"chunk truncated", kc, chunk[:60], false},
		{"dev item", Key{DevItemsObjectID, DevItemKey, 1}, dev, true},
		{"dev item devid", Key{DevItemsObjectID, DevItemKey, 2}, dev, false},
		{"dev item objectid", Key{2, DevItemKey, 1}, dev, false},
		{"dev item bytes used", Key{DevItemsObjectID, DevItemKey, 1}, edit(dev, func(b []byte) { le.PutUint64(b[16:], 1<<31) }), false},
		{"dev extent", kde, de, true},
		{"dev extent unaligned key", Key{1, DevExtentKey, 1<<20 + 1}, de, false},
		{"dev extent chunk tree", kde, edit(de, func(b []byte) { b[0] = 4 }), false},
		{"dev extent chunk objectid", kde, edit(de, func(b []byte) { b[8] = 1 }), false},
		{"dev extent length", kde, edit(de, func(b []byte) { b[24] = 1 }), false},
		{"dev extent size", kde, de[:47], false},
		{"csum", Key{ExtentCsumObjectID, ExtentCsumKey, 1 << 20}, make([]byte, 8), true},
		{"csum objectid", Key{5, ExtentCsumKey, 1 << 20}, make([]byte, 8), false},
		{"csum unaligned", Key{ExtentCsumObjectID, ExtentCsumKey, 1<<20 + 1}, make([]byte, 8), false},
		{"csum size", Key{ExtentCsumObjectID, ExtentCsumKey, 1 << 20}, make([]byte, 6), false},
		{"free space info", Key{1 << 20, FreeSpaceInfoKey, 8 << 20}, make([]byte, 8), true},
		{"free space info size", Key{1 << 20, FreeSpaceInfoKey, 8 << 20}, make([]byte, 7), false},
		{"free space extent", Key{1 << 20, FreeSpaceExtentKey, 4096}, nil, true},
		{"free space extent size", Key{1 << 20, FreeSpaceExtentKey, 4096}, []byte{0}, false},
		{"free space bitmap", Key{1 << 20, FreeSpaceBitmapKey, 8 << 20}, make([]byte, 256), true},
		{"free space bitmap size", Key{1 << 20, FreeSpaceBitmapKey, 8 << 20}, make([]byte, 255), false},
		{"uuid", Key{1, UUIDKeySubvol, 2}, make([]byte, 16), true},
		{"uuid size", Key{1, UUIDKeySubvol, 2}, make([]byte, 12), false},
		{"unknown type", Key{1, 99, 2}, []byte{1}, true},
	})
}
