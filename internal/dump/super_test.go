package dump

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// superBase returns the primary superblock of a fresh mkfs.btrfs image.
func superBase(t *testing.T) []byte {
	t.Helper()
	path := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw := make([]byte, disk.SuperblockSize)
	if _, err := f.ReadAt(raw, disk.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	return raw
}

// compareSuper writes raw as the primary superblock of a small file and
// compares `dump-super -f` (with extra arguments) with SuperHeader+Super.
func compareSuper(t *testing.T, name string, raw []byte, extra ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sb.img")
	buf := make([]byte, disk.SuperblockOffset+disk.SuperblockSize)
	copy(buf[disk.SuperblockOffset:], raw)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	want := runProgs(t, append(append([]string{"inspect-internal", "dump-super", "-f"}, extra...), path)...)
	var sb disk.Superblock
	if err := sb.Decode(raw); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := SuperHeader(&got, disk.SuperblockOffset, path); err != nil {
		t.Fatal(err)
	}
	if sb.Magic == disk.Magic || len(extra) > 0 {
		if err := Super(&got, &sb, raw, SuperOptions{Full: true}); err != nil {
			t.Fatal(err)
		}
		got.WriteString("\n")
	}
	if d := btrfstest.LineDiff(want, got.String()); d != "" {
		t.Errorf("%s: output differs from btrfs-progs (-want +got):\n%s", name, d)
	}
}

// edit returns a copy of raw changed by fn, with the checksum fixed when
// fix is set.
func edit(raw []byte, fix bool, fn func(b []byte)) []byte {
	b := bytes.Clone(raw)
	fn(b)
	if fix {
		t := disk.CsumType(le.Uint16(b[0xc4:]))
		if t.Valid() {
			t.SumBlock(b)
		}
	}
	return b
}

// TestCraftedSuper compares dump-super on superblocks with every flag bit,
// every checksum type, odd labels, damaged sys_chunk_arrays and partly
// empty backup roots.
func TestCraftedSuper(t *testing.T) {
	btrfstest.RequireProgs(t)
	base := superBase(t)
	put64 := func(off int, v uint64) func([]byte) { return func(b []byte) { le.PutUint64(b[off:], v) } }
	compareSuper(t, "base", base)
	for _, off := range []int{0x38, 0xac, 0xb4, 0xbc} {
		for bit := range 64 {
			compareSuper(t, fmt.Sprintf("field %#x bit %d", off, bit), edit(base, true, put64(off, 1<<bit)))
		}
		compareSuper(t, fmt.Sprintf("field %#x all", off), edit(base, true, put64(off, neg1)))
	}
	for _, v := range []uint64{0x3000, 0x2001, 0x6000, 0x4001, 0x2fff} {
		compareSuper(t, fmt.Sprintf("incompat %#x", v), edit(base, true, put64(0xbc, v)))
	}
	for _, ct := range []uint16{0, 1, 2, 3, 4, 255} {
		set := func(b []byte) { le.PutUint16(b[0xc4:], ct) }
		compareSuper(t, fmt.Sprintf("csum type %d fixed", ct), edit(base, true, set))
		compareSuper(t, fmt.Sprintf("csum type %d stale", ct), edit(base, false, set))
	}
	compareSuper(t, "label", edit(base, true, func(b []byte) { copy(b[0x12b:], "a\x01b\xffc d~\x7f") }))
	compareSuper(t, "full label", edit(base, true, func(b []byte) { copy(b[0x12b:0x22b], bytes.Repeat([]byte("L"), 256)) }))
	compareSuper(t, "metadata uuid", edit(base, true, func(b []byte) {
		le.PutUint64(b[0xbc:], le.Uint64(b[0xbc:])|disk.IncompatMetadataUUID)
		copy(b[0x23b:0x24b], "0123456789abcdef")
	}))
	compareSuper(t, "metadata uuid match", edit(base, true, func(b []byte) {
		le.PutUint64(b[0xbc:], le.Uint64(b[0xbc:])|disk.IncompatMetadataUUID)
		copy(b[0x23b:0x24b], b[0xc9+0x52:0xc9+0x62])
	}))
	for i, size := range []uint32{0, 10, 17, 17 + 47, 17 + 48, 129, 2048, 2049, 4000} {
		compareSuper(t, fmt.Sprintf("sys array size %d", i), edit(base, true, func(b []byte) { le.PutUint32(b[0xa0:], size) }))
	}
	compareSuper(t, "sys array key type", edit(base, true, func(b []byte) { b[sysArrayOffset+8] = 1 }))
	compareSuper(t, "sys array no stripes", edit(base, true, func(b []byte) { le.PutUint16(b[sysArrayOffset+17+44:], 0) }))
	compareSuper(t, "sys array many stripes", edit(base, true, func(b []byte) { le.PutUint16(b[sysArrayOffset+17+44:], 9) }))
	compareSuper(t, "backups", edit(base, true, func(b []byte) {
		s := 0xb2b
		clear(b[s : s+disk.BackupRootSize])
		le.PutUint64(b[s+96:], 12345)
		le.PutUint64(b[s+disk.BackupRootSize+8:], 0)
		le.PutUint64(b[s+2*disk.BackupRootSize:], 0)
	}))
	compareSuper(t, "extent tree v2 backups", edit(base, true, put64(0xbc, disk.IncompatExtentTreeV2|1)))
	compareSuper(t, "bad magic", edit(base, true, put64(0x40, 0x1234)))
	compareSuper(t, "bad magic forced", edit(base, true, put64(0x40, 0x1234)), "-F")
	compareSuper(t, "zeros forced", make([]byte, disk.SuperblockSize), "-F")
}
