package disk

import (
	"bytes"
	"testing"
)

type codec interface {
	Payload
	Decode([]byte) error
}

// fixedStruct describes one fixed-size on-disk structure: its documented
// size, a zero value, and how to make random bytes valid for it.
type fixedStruct struct {
	name  string // C struct
	size  int    // the size constant of this package
	doc   int    // the size the format doc gives
	zero  func() codec
	fixup func(b []byte)
}

func fixedStructs() []fixedStruct {
	none := func([]byte) {}
	return []fixedStruct{
		{"btrfs_inode_item", InodeItemSize, 160, func() codec { return new(InodeItem) }, none},
		{"btrfs_root_item", RootItemSize, 439, func() codec { return new(RootItem) }, none},
		{"btrfs_root_item (legacy)", RootItemLegacySize, 239, func() codec { return new(RootItem) }, none},
		{"btrfs_block_group_item", BlockGroupItemSize, 24, func() codec { return new(BlockGroupItem) }, none},
		{"btrfs_free_space_info", FreeSpaceInfoSize, 8, func() codec { return new(FreeSpaceInfo) }, none},
		{"btrfs_dev_extent", DevExtentSize, 48, func() codec { return new(DevExtent) }, none},
		{"btrfs_dev_item", DevItemSize, 98, func() codec { return new(DevItem) }, none},
		{"btrfs_dev_stats_item", DevStatsItemSize, 40, func() codec { return new(DevStatsItem) }, none},
		{"btrfs_qgroup_status_item", QgroupStatusSize, 40, func() codec { return new(QgroupStatusItem) }, none},
		{"btrfs_qgroup_status_item (legacy)", QgroupStatusLegacySize, 32, func() codec { return new(QgroupStatusItem) }, none},
		{"btrfs_qgroup_info_item", QgroupInfoSize, 40, func() codec { return new(QgroupInfoItem) }, none},
		{"btrfs_qgroup_limit_item", QgroupLimitSize, 40, func() codec { return new(QgroupLimitItem) }, none},
		{"btrfs_dev_replace_item", DevReplaceItemSize, 72, func() codec { return new(DevReplaceItem) }, none},
		{"btrfs_balance_item", BalanceItemSize, 448, func() codec { return new(BalanceItem) }, none},
		{"btrfs_verity_descriptor_item", VerityDescItemSize, 25, func() codec { return new(VerityDescItem) }, none},
		{"btrfs_dir_log_item", DirLogItemSize, 8, func() codec { return new(DirLogItem) }, none},
		{"btrfs_extent_data_ref", ExtentDataRefSize, 28, func() codec { return new(ExtentDataRef) }, none},
		{"btrfs_shared_data_ref", SharedDataRefSize, 4, func() codec { return new(SharedDataRef) }, none},
		{"btrfs_file_extent_item", FileExtentItemSize, 53, func() codec { return new(FileExtentItem) },
			func(b []byte) { b[20] = byte(FileExtentReg) }},
		{"btrfs_file_extent_item (inline header)", FileExtentInlineDataStart, 21, func() codec { return new(FileExtentItem) },
			func(b []byte) { b[20] = byte(FileExtentInline) }},
		{"btrfs_extent_item", ExtentItemBaseSize, 24, func() codec { return new(ExtentItem) },
			func(b []byte) { le.PutUint64(b[16:], uint64(ExtentFlagData)) }},
		{"btrfs_extent_item + btrfs_tree_block_info", ExtentItemBaseSize + TreeBlockInfoSize, 42, func() codec { return new(ExtentItem) },
			func(b []byte) { le.PutUint64(b[16:], uint64(ExtentFlagTreeBlock)) }},
		{"btrfs_dir_item (empty name)", DirItemBaseSize, 30, func() codec { return new(DirItems) },
			func(b []byte) { le.PutUint32(b[0x19:], 0) }},
		{"btrfs_inode_ref (empty name)", InodeRefBaseSize, 10, func() codec { return new(InodeRefs) },
			func(b []byte) { le.PutUint16(b[8:], 0) }},
		{"btrfs_inode_extref (empty name)", InodeExtrefBaseSize, 18, func() codec { return new(InodeExtrefs) },
			func(b []byte) { le.PutUint16(b[16:], 0) }},
		{"btrfs_root_ref (empty name)", RootRefBaseSize, 18, func() codec { return new(RootRef) },
			func(b []byte) { le.PutUint16(b[16:], 0) }},
		{"btrfs_chunk + 1 stripe", ChunkItemSize(1), 80, func() codec { return new(ChunkItem) },
			func(b []byte) { le.PutUint16(b[44:], 1) }},
	}
}

// TestOnDiskStructureSizes pins every fixed-size structure to the size the
// format doc gives: random bytes of that size decode, re-encode to the same
// bytes (so the fields tile the struct with no gap), encoding into one byte
// less panics, and decoding one byte less fails.
func TestOnDiskStructureSizes(t *testing.T) {
	r := testRand(t)
	for _, s := range fixedStructs() {
		t.Run(s.name, func(t *testing.T) {
			if s.size != s.doc {
				t.Fatalf("size constant %d, doc says %d", s.size, s.doc)
			}
			b := randBytes(r, s.size)
			s.fixup(b)
			v := s.zero()
			if err := v.Decode(b); err != nil {
				t.Fatalf("decode %d bytes: %v", s.size, err)
			}
			if got := PayloadSize(v); got != s.size {
				t.Fatalf("PayloadSize %d, want %d", got, s.size)
			}
			out := make([]byte, s.size)
			v.Encode(out)
			if !bytes.Equal(out, b) {
				t.Fatalf("encode differs from decoded bytes:\n got %x\nwant %x", out, b)
			}
			if s.size > 0 {
				assertPanics(t, func() { v.Encode(make([]byte, s.size-1)) })
				if err := s.zero().Decode(b[:s.size-1]); err == nil {
					t.Errorf("decoding %d bytes succeeded", s.size-1)
				}
			}
		})
	}
}

func TestInlineRefSizes(t *testing.T) {
	want := map[KeyType]int{TreeBlockRefKey: 9, SharedBlockRefKey: 9, ExtentDataRefKey: 29, SharedDataRefKey: 13, ExtentOwnerRefKey: 9, InodeItemKey: 0}
	for typ, n := range want {
		if got := InlineRefSize(typ); got != n {
			t.Errorf("InlineRefSize(%v) = %d, want %d", typ, got, n)
		}
	}
}

func TestOtherSizes(t *testing.T) {
	for name, c := range map[string][2]int{
		"key": {KeySize, 17}, "header": {HeaderSize, 101}, "item": {ItemSize, 25}, "key ptr": {KeyPtrSize, 33},
		"timespec": {TimespecSize, 12}, "superblock": {SuperblockSize, 4096}, "backup root": {BackupRootSize, 168},
		"balance args": {BalanceArgsSize, 136}, "stripe": {StripeSize, 32},
	} {
		if c[0] != c[1] {
			t.Errorf("%s size %d, want %d", name, c[0], c[1])
		}
	}
	var a BalanceArgs
	b := make([]byte, BalanceArgsSize)
	a.encode(b)
	assertPanics(t, func() { a.encode(b[:BalanceArgsSize-1]) })
}

func assertPanics(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Error("expected a panic")
		}
	}()
	f()
}
