package dump

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// pack encodes values little-endian one after the other: uint8/16/32/64,
// int64, disk.Key, []byte and string.
func pack(vals ...any) []byte {
	var b []byte
	for _, v := range vals {
		switch x := v.(type) {
		case uint8:
			b = append(b, x)
		case uint16:
			b = le.AppendUint16(b, x)
		case uint32:
			b = le.AppendUint32(b, x)
		case uint64:
			b = le.AppendUint64(b, x)
		case int:
			b = le.AppendUint64(b, uint64(x))
		case int64:
			b = le.AppendUint64(b, uint64(x))
		case disk.Key:
			var k [disk.KeySize]byte
			x.Encode(k[:])
			b = append(b, k[:]...)
		case []byte:
			b = append(b, x...)
		case string:
			b = append(b, x...)
		default:
			panic(fmt.Sprintf("pack: %T", v))
		}
	}
	return b
}

func key(id uint64, t disk.KeyType, off uint64) disk.Key {
	return disk.Key{ObjectID: disk.ObjectID(id), Type: t, Offset: off}
}

const neg1 = math.MaxUint64

// neg returns -v as an unsigned 64-bit value (the well-known negative ids).
func neg(v uint64) uint64 { return -v }

func dirEntry(loc disk.Key, transid uint64, typ uint8, name, data string) []byte {
	return pack(loc, transid, uint16(len(data)), uint16(len(name)), typ, name, data)
}

func inode(times [4]int64) []byte {
	b := pack(uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), uint32(6), uint32(7), uint32(8),
		uint32(0o100644), uint64(9), uint64(neg1), uint64(10), make([]byte, 32))
	for i, t := range times {
		b = append(b, pack(t, uint32(i*1000+7))...)
	}
	return b
}

func rootItem(gen, gen2, flags uint64, size int) []byte {
	b := make([]byte, disk.RootItemSize)
	copy(b, inode([4]int64{1, 2, 3, 4}))
	copy(b[0xa0:], pack(gen, uint64(256), uint64(123456), uint64(7), uint64(8), uint64(9), flags, uint32(1)))
	copy(b[0xdc:], pack(key(257, disk.InodeItemKey, 5), uint8(2), uint8(1), gen2))
	for i := range 48 {
		b[0xf7+i] = byte(i)
	}
	copy(b[0x127:], pack(uint64(11), uint64(12), uint64(13), uint64(14),
		int64(1700000000), uint32(5), int64(1700000001), uint32(6), int64(1700000002), uint32(7), int64(-1), uint32(8)))
	if size < len(b) {
		return b[:size]
	}
	return append(b, make([]byte, size-len(b))...)
}

func extentItem(refs, gen, flags uint64, rest ...any) []byte {
	return pack(append([]any{refs, gen, flags}, rest...)...)
}

func balanceArgs(base uint64) []byte {
	var b []byte
	for i := uint64(1); i <= 10; i++ {
		b = le.AppendUint64(b, base+i)
	}
	return pack(b, uint32(base+11), uint32(base+12), make([]byte, 48))
}

// craftedLeaves are leaves of items of every type, with damaged sizes and
// unusual values, each compared with progs.
func craftedLeaves() map[string][]craftItem {
	m := map[string][]craftItem{
		"block_groups":       blockGroupItems(),
		"quota_uuid_misc":    quotaItems(),
		"chunks_and_devices": deviceItems(),
	}
	for _, part := range []map[string][]craftItem{fsLeaves(), extentLeaves()} {
		for k, v := range part {
			m[k] = v
		}
	}
	return m
}

// fsLeaves are the items of subvolume trees.
func fsLeaves() map[string][]craftItem {
	u := func(v uint64) uint64 { return v }
	return map[string][]craftItem{
		"inode": {
			ci(256, disk.InodeItemKey, 0, inode([4]int64{-5, 1 << 40, 0, 1700000000})),
			ci(257, disk.InodeItemKey, 0, inode([4]int64{-62135596800, 253402300800, -2208988800, 67767976233532799})),
			ci(258, disk.InodeItemKey, 0, inode([4]int64{67767976233532800, 1, 2, 3})[:100]),
			ci(259, disk.OrphanItemKey, 0, nil),
		},
		"names": {
			ci(256, disk.InodeRefKey, 256, pack(u(3), uint16(3), "abc", u(4), uint16(5), "a\x01\xffz\n")),
			ci(256, disk.InodeRefKey, 257, pack(u(3), uint16(300), "abc")),
			ci(256, disk.InodeRefKey, 258, pack(u(3), uint16(300), bytes.Repeat([]byte("n"), 300))),
			ci(256, disk.InodeExtrefKey, 999, pack(u(256), u(7), uint16(4), "name", u(257), u(8), uint16(2), "x\x00y")),
			ci(256, disk.XattrItemKey, 1, append(dirEntry(disk.Key{}, 5, 8, "user.a", "val\x00ue\x01"), dirEntry(disk.Key{}, 5, 8, "user.b", "")...)),
			ci(256, disk.XattrItemKey, 2, dirEntry(disk.Key{}, 5, 8, string(bytes.Repeat([]byte("N"), 300)), string(bytes.Repeat([]byte("A"), 1000)))),
			ci(256, disk.DirItemKey, 2, bytes.Join([][]byte{dirEntry(key(257, 1, 0), 6, 1, "f1", ""),
				dirEntry(key(5, disk.RootItemKey, neg1), 6, 2, "sub", ""), dirEntry(key(258, 1, 0), 6, 9, "weird", ""),
				dirEntry(key(258, 1, 0), 6, 0x81, "enc", "")}, nil)),
			ci(256, disk.DirItemKey, 3, dirEntry(disk.Key{}, 5, 1, "abc", "")[:32]),
			ci(256, disk.DirIndexKey, 3, dirEntry(key(257, 1, 0), 6, 7, "lnk", "")),
			ci(256, disk.DirIndexKey, 4, pack(u(3), uint16(0))[:5]),
			ci(256, disk.DirLogItemKey, 4, pack(u(12345))),
			ci(256, disk.DirLogIndexKey, 5, pack(u(neg1))),
		},
		"file_extents": {
			ci(258, disk.ExtentDataKey, 0, pack(u(7), u(100), uint8(1), uint8(0), uint16(0), uint8(0), "compressed-bytes")),
			ci(258, disk.ExtentDataKey, 4096, pack(u(7), u(8192), uint8(0), uint8(0), uint16(0), uint8(1), u(12345678), u(4096), u(0), u(4096))),
			ci(258, disk.ExtentDataKey, 8192, pack(u(7), u(8192), uint8(3), uint8(0), uint16(0), uint8(2), u(12345678), u(4096), u(10), u(4096))),
			ci(258, disk.ExtentDataKey, 12288, pack(u(7), u(8192), uint8(7), uint8(1), uint16(2), uint8(5), u(12345678), u(4096), u(10), u(4096))),
			ci(258, disk.ExtentDataKey, 16384, pack(u(7), u(8192), uint8(2), uint8(0), uint16(0), uint8(1), u(0), u(0), u(0), u(4096))),
			ci(258, disk.ExtentDataKey, 20480, pack(u(7), u(8192), uint8(4), uint8(0), uint16(0), uint8(1))),
			ci(258, disk.ExtentDataKey, 24576, pack(u(7), u(8192), uint8(0), uint8(0), uint16(0), uint8(0))[:20]),
		},
		"roots": {
			ci(256, disk.RootItemKey, 0, rootItem(10, 10, 0, 439)),
			ci(257, disk.RootItemKey, 0, rootItem(10, 11, 1, 439)),
			ci(258, disk.RootItemKey, 0, rootItem(10, 10, 1<<48, 239)),
			ci(259, disk.RootItemKey, 0, rootItem(10, 10, 1<<48|3, 300)),
			ci(uint64(disk.TreeRelocObjectID), disk.RootItemKey, 7, rootItem(10, 10, 0, 439)),
			ci(uint64(disk.TreeRelocObjectID), disk.RootItemKey, 256, rootItem(10, 10, 0, 439)),
			ci(uint64(disk.TreeRelocObjectID), disk.RootItemKey, neg1, rootItem(10, 10, 0, 439)),
			ci(261, disk.RootRefKey, 262, pack(u(256), u(3), uint16(4), "subv")),
			ci(262, disk.RootBackrefKey, 261, pack(u(256), u(3), uint16(4), "s\x00bv")),
		},
	}
}

// extentLeaves are the items of the extent and free space trees.
func extentLeaves() map[string][]craftItem {
	u := func(v uint64) uint64 { return v }
	return map[string][]craftItem{
		"extents": {
			ci(1000, disk.ExtentItemKey, 4096, extentItem(3, 7, 1, uint8(178), u(5), u(257), u(0), uint32(2),
				uint8(184), u(99999), uint32(1), uint8(176), u(5))),
			ci(1001, disk.ExtentItemKey, 16384, extentItem(2, 7, 2, key(256, 1, 0), uint8(1), uint8(176), u(uint64(disk.DataRelocTreeObjectID)),
				uint8(182), u(12345), uint8(172), u(5))),
			ci(1002, disk.ExtentItemKey, 16384, extentItem(2, 7, 2|256, key(256, 1, 0), uint8(1), uint8(182), u(12345), uint8(99), u(5), uint8(176), u(5))),
			ci(1003, disk.ExtentItemKey, 16384, extentItem(2, 7, 0)),
			ci(1005, disk.ExtentItemKey, 16384, extentItem(2, 7, 256)),
			ci(1005, disk.ExtentItemKey, 16385, extentItem(2, 7, 1|256)),
			ci(1006, disk.ExtentItemKey, 16384, pack(uint32(5))),
			ci(1006, disk.ExtentItemKey, 16385, pack(u(1), uint32(5))),
			ci(1008, disk.MetadataItemKey, 1, extentItem(1, 7, 2, uint8(176), u(256))),
			ci(1008, disk.MetadataItemKey, 2, extentItem(1, 7, 2|256, uint8(182), u(4096), uint8(182), u(8192))),
			ci(1008, disk.MetadataItemKey, 1<<32|3, extentItem(1, 7, 2, uint8(176), u(uint64(disk.TreeRelocObjectID)))),
			ci(1009, disk.TreeBlockRefKey, 5, nil),
			ci(1009, disk.SharedBlockRefKey, 4096, nil),
			ci(1009, disk.ExtentDataRefKey, 12345, pack(u(5), u(257), u(0), uint32(3), u(6), u(258), u(0), uint32(4))),
			ci(1009, disk.SharedDataRefKey, 4096, pack(uint32(7))),
			ci(1009, disk.ExtentRefV0Key, 4096, pack(u(5), u(6), u(7), uint32(8))),
			ci(1009, csumItemKey, 4096, pack(uint32(8))),
			ci(1010, disk.ExtentOwnerRefKey, 5, nil),
		},
		"extent_tree_block_info_overrun": {
			// The first item's data ends the block: progs would read past it.
			ci(1, disk.StringItemKey, 0, []byte("padding, more than a tree block info")),
			ci(1004, disk.ExtentItemKey, 16384, extentItem(2, 7, neg1)),
		},
		"free_space": {
			ci(2002, disk.FreeSpaceInfoKey, 4096, pack(uint32(3), uint32(1))),
			ci(2002, disk.FreeSpaceExtentKey, 4096, nil),
			ci(2002, disk.FreeSpaceBitmapKey, 4096, []byte{0xff, 0}),
			ci(uint64(disk.FreeSpaceObjectID), 0, 4096, pack(key(257, 1, 0), u(5), u(6), u(7))),
			ci(uint64(disk.FreeSpaceObjectID), 0, 8192, pack(u(1), u(2))),
		},
	}
}

// deviceItems are the items of the chunk and device trees.
func deviceItems() []craftItem {
	u := func(v uint64) uint64 { return v }
	return []craftItem{
		ci(256, disk.ChunkItemKey, 4096, pack(u(8388608), u(2), u(65536), u(1|16), uint32(65536), uint32(65536), uint32(4096),
			uint16(3), uint16(2), u(1), u(100), bytes.Repeat([]byte{1}, 16), u(2), u(200), bytes.Repeat([]byte{2}, 16), u(3), u(300), make([]byte, 16))),
		ci(256, disk.ChunkItemKey, 8192, pack(u(8388608), u(2), u(65536), u(1), uint32(65536), uint32(65536), uint32(4096), uint16(1), uint16(0))),
		ci(1, disk.DevItemKey, 1, pack(u(1), u(2), u(3), uint32(4), uint32(5), uint32(6), u(7), u(8), u(9), uint32(10), uint8(11), uint8(12),
			bytes.Repeat([]byte{0xab}, 16), bytes.Repeat([]byte{0xcd}, 16))),
		ci(1, disk.DevExtentKey, 4096, pack(u(3), u(256), u(4096), u(8192), bytes.Repeat([]byte{0xef}, 16))),
		ci(0, disk.DevReplaceKey, 0, pack(u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9))),
		ci(0, disk.PersistentItemKey, 1, pack(u(1), u(2), u(3), u(4), u(5))),
		ci(0, disk.PersistentItemKey, 2, pack(u(1), u(2), u(3), u(4), u(5), u(6), u(7))),
		ci(0, disk.PersistentItemKey, 3, pack(u(1), u(2), u(3), u(4), u(5), u(6), "abcd")),
		ci(0, disk.PersistentItemKey, 4, pack(u(1), u(2), u(3), u(4), u(5), "ab")),
		ci(0, disk.PersistentItemKey, 5, pack(u(1), u(2), u(3))),
		ci(5, disk.PersistentItemKey, 3, pack(u(1), u(2), u(3), u(4), u(5))),
	}
}

func blockGroupItems() []craftItem {
	flags := []uint64{1, 0, 2, 4, 5, 6, 7, 1 | 8, 1 | 16, 1 | 32, 1 | 64, 1 | 128, 1 | 256, 1 | 512, 1 | 1024, 1 | 2048,
		1 | 16 | 32, 4 | 1<<48, neg1, 2 | 8 | 128, 512 | 1024, 32 | 8}
	var items []craftItem
	for i, f := range flags {
		items = append(items, ci(2001, disk.BlockGroupItemKey, uint64(i), pack(uint64(100), uint64(256), f)))
	}
	return items
}

func quotaItems() []craftItem {
	var items []craftItem
	for i, f := range []uint64{0, 1, 2, 3, 4, 5, 7, 8, 15, 16} {
		items = append(items, ci(0, disk.QgroupStatusKey, uint64(i), pack(uint64(1), uint64(5), f, uint64(99), uint64(7))))
	}
	b := balanceArgs
	return append(items,
		ci(0, disk.QgroupStatusKey, 100, pack(uint64(1), uint64(5), uint64(1), uint64(99))),
		ci(0, disk.QgroupInfoKey, 5, pack(uint64(5), uint64(1), uint64(2), uint64(3), uint64(4))),
		ci(0, disk.QgroupInfoKey, 1<<48|7, pack(uint64(5), uint64(1), uint64(2), uint64(3), uint64(4))),
		ci(0, disk.QgroupLimitKey, 5, pack(uint64(3), uint64(neg1), uint64(100), uint64(1<<63), uint64(4))),
		ci(0, disk.QgroupRelationKey, 5, nil),
		ci(1<<48|5, disk.QgroupRelationKey, 0, nil),
		ci(3000, disk.UUIDKeySubvol, 5, pack(uint64(5), uint64(256), uint64(257))),
		ci(3000, disk.UUIDKeyReceivedSubvol, 5, pack(uint64(5), uint64(256), "abc")),
		ci(3000, disk.StringItemKey, 5, []byte("hello\x00world")),
		ci(3001, disk.VerityDescItemKey, 0, pack(uint64(100), uint64(0), uint64(0), uint8(0))),
		ci(3001, disk.VerityDescItemKey, 1, []byte("descriptor")),
		ci(3001, disk.VerityMerkleItemKey, 0, []byte("merkle")),
		ci(3002, disk.RaidStripeKey, 0, []byte{1, 2}),
		ci(uint64(disk.BalanceObjectID), disk.TemporaryItemKey, 0, pack(uint64(0x1f), b(0), b(100), b(200), make([]byte, 32))),
		ci(5, disk.TemporaryItemKey, 0, pack(uint64(0x1f))),
	)
}

// keyNameItems are directory entries whose locations are keys of every
// type and of the object ids progs names: key printing in isolation.
func keyNameItems() [][]craftItem {
	ids := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 255, 256, 257, 1 << 48, 1 << 63}
	for i := uint64(1); i <= 13; i++ {
		ids = append(ids, -i)
	}
	ids = append(ids, neg(255), neg(256), neg(254))
	offsets := []uint64{0, 7, neg1, 1<<63 + 5, 1<<48 | 5}
	var all []craftItem
	for t := 0; t < 256; t++ {
		for _, id := range ids {
			all = append(all, craftItem{data: dirEntry(key(id, disk.KeyType(t), offsets[(uint64(t)+id)%uint64(len(offsets))]), 0, 1, "x", "")})
		}
	}
	var leaves [][]craftItem
	for len(all) > 0 {
		n := min(len(all), 150)
		leaf := all[:n]
		for i := range leaf {
			leaf[i].key = key(1000, disk.DirIndexKey, uint64(i))
		}
		leaves = append(leaves, leaf)
		all = all[n:]
	}
	return leaves
}

// TestCraftedItems compares Block with progs on leaves of crafted items.
func TestCraftedItems(t *testing.T) {
	btrfstest.RequireProgs(t)
	c := newCraftFS(t, btrfstest.MkfsOptions{})
	for name, items := range craftedLeaves() {
		n := c.leaf(t, items)
		c.compareBlock(t, name, n, BlockOptions{})
		c.compareBlock(t, name+" --hide-names", n, BlockOptions{HideNames: true}, "--hide-names")
	}
	for i, items := range keyNameItems() {
		c.compareBlock(t, fmt.Sprintf("keys %d", i), c.leaf(t, items), BlockOptions{})
	}
}

// TestCraftedHeaders compares header lines: flags, backref revisions,
// owners, generations, levels and node pointers.
func TestCraftedHeaders(t *testing.T) {
	btrfstest.RequireProgs(t)
	c := newCraftFS(t, btrfstest.MkfsOptions{})
	cases := []struct {
		flags, owner, gen uint64
		level             uint8
		ptrs              int
	}{
		{0, 5, 5, 0, 0}, {2, neg(8), 5, 0, 0}, {3 | 2<<56, 256, 5, 0, 0}, {1 | 1<<20, 0, 5, 0, 0},
		{1 | 1<<56, 1, 5, 1, 3}, {1 | 1<<56, neg(7), 5, 2, 2}, {1 | 1<<56, neg(5), neg1, 0, 0},
		{neg1, neg1, 5, 7, 1},
	}
	for i, tc := range cases {
		n := c.leaf(t, nil)
		le.PutUint64(n[0x38:], tc.flags)
		le.PutUint64(n[0x58:], tc.owner)
		le.PutUint64(n[0x50:], tc.gen)
		n[0x64] = tc.level
		le.PutUint32(n[0x60:], uint32(tc.ptrs))
		for j := 0; j < tc.ptrs; j++ {
			disk.PutKeyPtr(n, j, disk.KeyPtr{Key: key(256+uint64(j), 1, 0), BlockPtr: disk.LogicalAddr(1<<30 + 16384*j), Generation: 4})
		}
		c.sb.CsumType.SumBlock(n)
		c.compareBlock(t, fmt.Sprintf("header %d", i), n, BlockOptions{})
		c.compareBlock(t, fmt.Sprintf("header %d csum", i), n, BlockOptions{CsumHeaders: true}, "--csum-headers")
	}
}

// TestCraftedCsums compares EXTENT_CSUM items of every checksum type with
// and without --csum-items, and header checksums.
func TestCraftedCsums(t *testing.T) {
	btrfstest.RequireProgs(t)
	for _, cs := range []string{"crc32c", "xxhash", "sha256", "blake2"} {
		c := newCraftFS(t, btrfstest.MkfsOptions{Csum: cs})
		var items []craftItem
		for n := 0; n <= 9; n++ {
			data := bytes.Repeat([]byte{byte(n + 1)}, n*c.sb.CsumType.Size()+n%3)
			items = append(items, ci(uint64(disk.ExtentCsumObjectID), disk.ExtentCsumKey, uint64(n)<<20, data))
		}
		n := c.leaf(t, items)
		c.compareBlock(t, cs, n, BlockOptions{})
		c.compareBlock(t, cs+" --csum-items", n, BlockOptions{CsumItems: true}, "--csum-items")
		c.compareBlock(t, cs+" --csum-headers", n, BlockOptions{CsumHeaders: true}, "--csum-headers")
	}
}
