package disk

import (
	"slices"
	"strings"
	"testing"
)

func TestFlagStrings(t *testing.T) {
	cases := []struct{ got, want string }{
		{InodeFlags(0).String(), "none"},
		{(InodeNoDataSum | InodePrealloc).String(), "NODATASUM|PREALLOC"},
		{(InodeNoCompress | 1<<40).String(), "NOCOMPRESS|UNKNOWN.0x10000000000"},
		{InodeROVerity.String(), "VERITY"},
		{RootFlags(0).String(), "none"},
		{RootSubvolReadonly.String(), "RDONLY"},
		{ExtentFlagData.String(), "DATA"},
		{(ExtentFlagTreeBlock | ExtentFlagFullBackref).String(), "TREE_BLOCK|FULL_BACKREF"},
		{HeaderFlagsString(DefaultHeaderFlags), "WRITTEN"},
		{HeaderFlagsString(HeaderFlagWritten | HeaderFlagReloc), "WRITTEN|RELOC"},
		{QgroupStatusFlagsString(QgroupStatusOn), "ON"},
		{BlockGroupTypeString(BlockGroupData), "DATA|single"},
		{BlockGroupTypeString(BlockGroupMetadata | BlockGroupDUP), "METADATA|DUP"},
		{FtRegular.String(), "FILE"},
		{FtXattr.String(), "XATTR"},
		{FileType(9).String(), "UNKNOWN.9"},
		{(FtDir | FtEncrypted).String(), "DIR|ENCRYPTED"},
		{FileExtentPrealloc.String(), "prealloc"},
		{CompressZstd.String(), "zstd"},
		{MakeQgroupID(1, 100).String(), "1/100"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	names, unknown := IncompatFlagNames(0x341 | 1<<15)
	if strings.Join(names, " ") != "MIXED_BACKREF EXTENDED_IREF SKINNY_METADATA NO_HOLES" || unknown != 1<<15 {
		t.Errorf("incompat 0x341: %v unknown %#x", names, unknown)
	}
	names, unknown = CompatROFlagNames(0x3)
	if strings.Join(names, " ") != "FREE_SPACE_TREE FREE_SPACE_TREE_VALID" || unknown != 0 {
		t.Errorf("compat_ro 0x3: %v unknown %#x", names, unknown)
	}
	names, _ = SuperFlagNames(SuperFlagWritten | SuperFlagSeeding)
	if strings.Join(names, " ") != "WRITTEN SEEDING" {
		t.Errorf("super flags: %v", names)
	}
}

func TestModes(t *testing.T) {
	for ft := FtRegular; ft <= FtSymlink; ft++ {
		if FileTypeOfMode(ft.Mode()|0o644) != ft {
			t.Errorf("%v does not survive mode conversion", ft)
		}
		if !ValidMode(ft.Mode() | 0o7777) {
			t.Errorf("mode %o rejected", ft.Mode()|0o7777)
		}
	}
	for _, m := range []uint32{0, 0o644, 0o030644, 0o100644 | 1<<16} {
		if ValidMode(m) {
			t.Errorf("mode %o accepted", m)
		}
	}
	if r := MakeRdev(1, 3); r != 0x100003 || RdevMajor(r) != 1 || RdevMinor(r) != 3 {
		t.Errorf("rdev 1:3 = %#x", r)
	}
	if !ObjectID(5).IsFSTree() || !ObjectID(256).IsFSTree() || ObjectID(7).IsFSTree() ||
		DataRelocTreeObjectID.IsFSTree() || ObjectID(1<<48).IsFSTree() {
		t.Error("IsFSTree")
	}
}

func TestBitmapRuns(t *testing.T) {
	r := testRand(t)
	for range 200 {
		bm := randBytes(r, r.IntN(12))
		for i := range bm { // make long runs likely
			switch r.IntN(3) {
			case 0:
				bm[i] = 0
			case 1:
				bm[i] = 0xff
			}
		}
		nbits := uint64(r.IntN(len(bm)*8 + 9))
		var want [][2]uint64
		for i := uint64(0); i < nbits; i++ {
			if !BitmapTest(bm, i) {
				continue
			}
			if n := len(want); n > 0 && want[n-1][0]+want[n-1][1] == i {
				want[n-1][1]++
			} else {
				want = append(want, [2]uint64{i, 1})
			}
		}
		var got [][2]uint64
		for s, n := range BitmapRuns(bm, nbits) {
			got = append(got, [2]uint64{s, n})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("bitmap %x nbits %d: runs %v, want %v", bm, nbits, got, want)
		}
	}
	bm := make([]byte, 4)
	BitmapSet(bm, 3, 10)
	BitmapClear(bm, 5, 2)
	if bm[0] != 0x98 || bm[1] != 0x1f || bm[2] != 0 {
		t.Errorf("set/clear gave %x", bm)
	}
	if FreeSpaceBitmapSize(8<<20, 4096) != 256 || FreeSpaceBitmapSize(9*4096, 4096) != 2 || FreeSpaceBitmapSize(4096, 0) != 0 {
		t.Error("FreeSpaceBitmapSize")
	}
}

func TestCsumItemHelpers(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	sums, err := CsumItemSums(data, 4)
	if err != nil || len(sums) != 3 || sums[2][0] != 9 {
		t.Fatalf("sums %v %v", sums, err)
	}
	if _, err := CsumItemSums(data, 8); err == nil {
		t.Error("12 bytes split into 8-byte sums")
	}
	if end, ok := CsumItemEnd(1<<20, 12, 4, 4096); !ok || end != 1<<20+3*4096 {
		t.Errorf("end %d", end)
	}
	if _, ok := CsumItemEnd(^uint64(0)-4095, 8, 4, 4096); ok {
		t.Error("overflowing end accepted")
	}
	if s, ok := CsumItemLookup(1<<20, data, 4, 4096, 1<<20+8192); !ok || s[0] != 9 {
		t.Errorf("lookup %v %v", s, ok)
	}
	for _, l := range []uint64{1<<20 - 4096, 1<<20 + 3*4096, 1<<20 + 1} {
		if _, ok := CsumItemLookup(1<<20, data, 4, 4096, l); ok {
			t.Errorf("lookup of %d found a sum", l)
		}
	}
}

func TestInlineRefOrder(t *testing.T) {
	// The doc's example: data refs of one extent appear in descending hash order.
	a := InlineRef{Type: ExtentDataRefKey, Data: ExtentDataRef{Root: 5, ObjectID: 257, Count: 1}}
	b := InlineRef{Type: ExtentDataRefKey, Data: ExtentDataRef{Root: 5, ObjectID: 261, Count: 1}}
	tb := InlineRef{Type: TreeBlockRefKey, Offset: 256}
	tb2 := InlineRef{Type: TreeBlockRefKey, Offset: 257}
	own := InlineRef{Type: ExtentOwnerRefKey, Offset: 5}
	refs := []InlineRef{b, tb, a, own, tb2}
	SortInlineRefs(refs)
	want := []InlineRef{own, tb2, tb, a, b}
	if !slices.Equal(refs, want) {
		t.Fatalf("sorted %v, want %v", refs, want)
	}
	if err := CheckInlineRefOrder(refs); err != nil {
		t.Fatal(err)
	}
	if err := CheckInlineRefOrder([]InlineRef{a, a}); err != nil {
		t.Errorf("equal neighbours rejected: %v", err)
	}
	for _, bad := range [][]InlineRef{{b, a}, {tb, tb2}, {a, tb}, {tb, own}} {
		if err := CheckInlineRefOrder(bad); err == nil {
			t.Errorf("order %v accepted", bad)
		}
	}
	r := testRand(t)
	for range 100 {
		refs := make([]InlineRef, r.IntN(8))
		for i := range refs {
			refs[i] = randInlineRef(r)
		}
		SortInlineRefs(refs)
		if err := CheckInlineRefOrder(refs); err != nil {
			t.Fatalf("sorted refs fail the order check: %v", err)
		}
	}
}

func TestUUIDKey(t *testing.T) {
	u, _ := ParseUUID("562d5e5a-4ab4-42cb-9b8e-6b1cfaa5abca")
	k := UUIDKey(u, UUIDKeySubvol)
	if k.ObjectID != 0xcb42b44a5a5e2d56 || k.Offset != 0xcaaba5fa1c6b8e9b || UUIDOfKey(k) != u {
		t.Errorf("uuid key %v", k)
	}
}
