package disk

import "testing"

func TestHashVectors(t *testing.T) {
	if got := CRC32C([]byte("123456789")); got != 0xE3069283 {
		t.Errorf("crc32c = %#x", got)
	}
	names := map[string]uint64{"default": 0x8DBFC2D2, "d1": 295870002, "small.txt": 474883676, "f": 411982631, "user.color": 3204299001}
	for n, want := range names {
		if got := NameHash([]byte(n)); got != want {
			t.Errorf("NameHash(%q) = %d, want %d", n, got, want)
		}
	}
	if got := ExtrefHash(863, []byte("link_with_a_rather_long_name_to_fill_the_inode_ref_item_quickly_0249")); got != 32114009 {
		t.Errorf("ExtrefHash = %d", got)
	}
	if got := DataRefHash(5, 257, 0); got != 0x0DFB591FA80D95EA {
		t.Errorf("DataRefHash(5,257,0) = %#x", got)
	}
	if got := DataRefHash(5, 261, 0); got != 0x0DFB591F6E093901 {
		t.Errorf("DataRefHash(5,261,0) = %#x", got)
	}
}

func TestCsumSizes(t *testing.T) {
	for typ, want := range map[CsumType]int{CsumCRC32C: 4, CsumXXHash: 8, CsumSHA256: 32, CsumBlake2: 32} {
		if got := len(typ.Sum(nil, []byte("x"))); got != want || typ.Size() != want {
			t.Errorf("%v: sum %d bytes, Size %d, want %d", typ, got, typ.Size(), want)
		}
		blk := make([]byte, 4096)
		blk[100] = 7
		typ.SumBlock(blk)
		if !typ.VerifyBlock(blk) {
			t.Errorf("%v: block does not verify after SumBlock", typ)
		}
		blk[200] ^= 1
		if typ.VerifyBlock(blk) {
			t.Errorf("%v: flipped block verifies", typ)
		}
	}
}
