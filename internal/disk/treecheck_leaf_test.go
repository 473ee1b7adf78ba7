package disk

import (
	"errors"
	"strings"
	"testing"
)

func inodeItemBytes(mode uint32) []byte {
	return enc(&InodeItem{Generation: 5, TransID: 5, NLink: 1, Mode: mode})
}

func regExtent(disk LogicalAddr, n uint64) []byte {
	return enc(&FileExtentItem{Generation: 5, RAMBytes: n, Type: FileExtentReg, DiskBytenr: disk, DiskNumBytes: n, NumBytes: n})
}

func fsLeafItems() []testItem {
	name := []byte("f")
	return []testItem{
		{Key{256, InodeItemKey, 0}, inodeItemBytes(ModeDir | 0o755)},
		{Key{256, InodeRefKey, 256}, enc(&InodeRefs{{Index: 0, Name: []byte("..")}})},
		{Key{256, DirItemKey, NameHash(name)}, dirEntry(Key{257, InodeItemKey, 0}, FtRegular, "f", "")},
		{Key{256, DirIndexKey, 2}, dirEntry(Key{257, InodeItemKey, 0}, FtRegular, "f", "")},
		{Key{257, InodeItemKey, 0}, inodeItemBytes(ModeRegular | 0o644)},
		{Key{257, InodeRefKey, 256}, enc(&InodeRefs{{Index: 2, Name: name}})},
		{Key{257, XattrItemKey, NameHash([]byte("user.a"))}, dirEntry(Key{}, FtXattr, "user.a", "v")},
		{Key{257, ExtentDataKey, 0}, regExtent(1<<20, 8192)},
		{Key{257, ExtentDataKey, 8192}, regExtent(2<<20, 4096)},
	}
}

func TestCheckLeafItems(t *testing.T) {
	csum := func(off uint64, n int) testItem {
		return testItem{Key{ExtentCsumObjectID, ExtentCsumKey, off}, make([]byte, 4*n)}
	}
	meta := enc(&ExtentItem{Refs: 1, Generation: 5, Flags: ExtentFlagTreeBlock, InlineRefs: []InlineRef{{Type: TreeBlockRefKey, Offset: 5}}})
	data := enc(&ExtentItem{Refs: 1, Generation: 5, Flags: ExtentFlagData,
		InlineRefs: []InlineRef{{Type: ExtentDataRefKey, Data: ExtentDataRef{Root: 5, ObjectID: 257, Count: 1}}}})
	devExt := func(start, n uint64) testItem {
		return testItem{Key{1, DevExtentKey, start}, enc(&DevExtent{ChunkTree: 3, ChunkObjectID: 256, ChunkOffset: 1 << 20, Length: n})}
	}
	fs := fsLeafItems()
	withItem := func(i int, it testItem) []testItem {
		out := append([]testItem{}, fs...)
		out[i] = it
		return out
	}
	inline := enc(&FileExtentItem{Generation: 5, RAMBytes: 6, Type: FileExtentInline, InlineData: []byte("hello\n")})
	cases := []struct {
		name  string
		tree  ObjectID
		items []testItem
		want  string // "" accepts
	}{
		{"fs leaf", 5, fs, ""},
		{"missing inode item", 5, append(fs[:4:4], fs[5:]...), "inode item missing"},
		{"missing inode item outside fs trees", ExtentTreeObjectID, append(fs[:4:4], fs[5:]...), ""},
		{"first slot exempt", 5, fs[5:], ""},
		{"extent overlap", 5, withItem(8, testItem{Key{257, ExtentDataKey, 4096}, regExtent(2<<20, 4096)}), "overlaps previous extent"},
		{"inline then regular", 5, append(withItem(7, testItem{Key{257, ExtentDataKey, 0}, inline})[:8:8],
			testItem{Key{257, ExtentDataKey, 4096}, regExtent(2<<20, 4096)}), ""},
		{"bad item inside leaf", 5, withItem(4, testItem{Key{257, InodeItemKey, 0}, inodeItemBytes(0o644)}), "invalid inode mode"},
		{"csums", CsumTreeObjectID, []testItem{csum(1<<20, 2), csum(1<<20+8192, 1)}, ""},
		{"csum overlap", CsumTreeObjectID, []testItem{csum(1<<20, 3), csum(1<<20+8192, 1)}, "overlaps previous csum"},
		{"extents", ExtentTreeObjectID, []testItem{{Key{1 << 20, MetadataItemKey, 0}, meta}, {Key{1<<20 + 16384, ExtentItemKey, 4096}, data}}, ""},
		{"metadata overlap", ExtentTreeObjectID, []testItem{{Key{1 << 20, MetadataItemKey, 0}, meta}, {Key{1<<20 + 4096, MetadataItemKey, 0}, meta}}, "overlaps previous extent"},
		{"data overlap", ExtentTreeObjectID, []testItem{{Key{1 << 20, ExtentItemKey, 8192}, data}, {Key{1<<20 + 4096, ExtentItemKey, 4096}, data}}, "overlaps previous extent"},
		{"extent then block group", ExtentTreeObjectID, []testItem{{Key{1 << 20, ExtentItemKey, 8192}, data},
			{Key{1 << 20, BlockGroupItemKey, 8 << 20}, enc(&BlockGroupItem{Used: 8192, ChunkObjectID: 256, Flags: BlockGroupData})}}, ""},
		{"dev extents", DevTreeObjectID, []testItem{devExt(1<<20, 1<<20), devExt(2<<20, 1<<20)}, ""},
		{"dev extent overlap", DevTreeObjectID, []testItem{devExt(1<<20, 1<<20+4096), devExt(2<<20, 1<<20)}, "overlaps previous dev extent"},
	}
	for _, c := range cases {
		n := buildLeaf(t, 16384, 1<<22, c.tree, c.items)
		p := checkParams
		p.Tree = 0 // taken from the header
		err := CheckLeafItems(n, p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: rejected: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrCorrupt)):
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestCheckLeafItemsLayout(t *testing.T) {
	n := buildLeaf(t, 4096, 1<<22, 5, fsLeafItems()[:3])
	if err := CheckLeafItems(n, checkParams); err != nil {
		t.Fatalf("valid leaf: %v", err)
	}
	bad := append(Node{}, n...)
	PutItemHeader(bad, 1, Item{Key: bad.Key(1), Offset: 4000, Size: 500}) // overruns the block
	if err := CheckLeafItems(bad, checkParams); err == nil || !errors.Is(err, ErrCorrupt) {
		t.Errorf("overrunning item: %v", err)
	}
	le.PutUint32(bad[0x60:], 1000) // more headers than fit
	if err := CheckLeafItems(bad, checkParams); err == nil {
		t.Error("too many items accepted")
	}
	if err := CheckLeafItems(n[:50], checkParams); err == nil {
		t.Error("short block accepted")
	}
	node := append(Node{}, n...)
	node[0x64] = 1
	if err := CheckLeafItems(node, checkParams); err != nil {
		t.Errorf("node: %v", err)
	}
}
