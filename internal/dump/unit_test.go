package dump

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// buildLeaf makes a leaf of nodesize bytes holding items (sorted), with a
// plain header, for tests that need no image.
func buildLeaf(items []craftItem, nodesize int) disk.Node {
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b craftItem) int { return a.key.Compare(b.key) })
	n := make(disk.Node, nodesize)
	h := disk.Header{Bytenr: 1 << 30, Flags: disk.DefaultHeaderFlags, Generation: 7, Owner: disk.FSTreeObjectID}
	h.Encode(n)
	end := nodesize - disk.HeaderSize
	nr := 0
	for i, it := range items {
		if end-len(it.data) < disk.ItemSize*(i+1) {
			break
		}
		end -= len(it.data)
		disk.PutItemHeader(n, i, disk.Item{Key: it.key, Offset: uint32(end), Size: uint32(len(it.data))})
		copy(n[disk.HeaderSize+end:], it.data)
		nr++
	}
	le.PutUint32(n[0x60:], uint32(nr))
	disk.CsumCRC32C.SumBlock(n)
	return n
}

func TestKeyString(t *testing.T) {
	for _, tc := range []struct {
		k    disk.Key
		want string
	}{
		{key(5, disk.RootItemKey, 0), "key (FS_TREE ROOT_ITEM 0)"},
		{key(5, disk.RootItemKey, neg1), "key (FS_TREE ROOT_ITEM 18446744073709551615)"},
		{key(neg(8), disk.RootItemKey, 7), "key (TREE_RELOC ROOT_ITEM CSUM_TREE)"},
		{key(neg(10), disk.ExtentCsumKey, 13631488), "key (EXTENT_CSUM EXTENT_CSUM 13631488)"},
		{key(256, disk.InodeItemKey, 0), "key (256 INODE_ITEM 0)"},
		{key(256, disk.ChunkItemKey, 22020096), "key (FIRST_CHUNK_TREE CHUNK_ITEM 22020096)"},
		{key(1, disk.DevItemKey, 1), "key (DEV_ITEMS DEV_ITEM 1)"},
		{key(1, disk.InodeItemKey, neg1), "key (ROOT_TREE INODE_ITEM -1)"},
		{key(neg1, 7, 1), "key (-1 UNKNOWN.7 1)"},
		{key(0x2c4f9418d28626c6, disk.UUIDKeySubvol, 0xc075097849eb5290), "key (0x2c4f9418d28626c6 UUID_KEY_SUBVOL 0xc075097849eb5290)"},
		{key(1<<48|5, disk.QgroupRelationKey, 5), "key (1/5 QGROUP_RELATION 0/5)"},
		{key(0, disk.PersistentItemKey, 1), "key (DEV_STATS PERSISTENT_ITEM 1)"},
		{key(neg(11), 0, 4096), "key (FREE_SPACE UNTYPED 4096)"},
		{key(2, disk.DevExtentKey, 1), "key (2 DEV_EXTENT 1)"},
		{key(neg(255), disk.RaidStripeKey, 1), "key (MULTIPLE UNKNOWN.230 1)"},
	} {
		if got := keyString(tc.k); got != tc.want {
			t.Errorf("keyString(%v) = %q, want %q", tc.k, got, tc.want)
		}
	}
}

func TestFlagStrings(t *testing.T) {
	for f, want := range map[uint64]string{0: "", 1: "DATA", 2: "TREE_BLOCK", 258: "TREE_BLOCK|FULL_BACKREF", 256: "|FULL_BACKREF", 257: "DATA|FULL_BACKREF"} {
		if got := extentFlagsString(f); got != want {
			t.Errorf("extentFlagsString(%d) = %q, want %q", f, got, want)
		}
	}
	for f, want := range map[uint64]string{0: "|single", 1: "DATA|single", 6: "METADATASYSTEM|single", 7: "DATA|METADATA|SYSTEM|single",
		4 | 32: "METADATA|DUP", 1 | 16 | 32: "DATA|RAID1", 2 | 64 | 16: "SYSTEM|RAID10"} {
		if got := blockGroupFlagsString(f); got != want {
			t.Errorf("blockGroupFlagsString(%#x) = %q, want %q", f, got, want)
		}
	}
	if got := inodeFlagsString(1<<31 | 1 | 1<<11); got != "NODATASUM|COMPRESS" {
		t.Errorf("inodeFlagsString = %q", got)
	}
	if got := qgroupStatusFlagsString(7); got != "ON|SCANNING|INCONSISTENT" {
		t.Errorf("qgroupStatusFlagsString(7) = %q", got)
	}
}

// TestCivilString checks the calendar arithmetic against package time over
// its range, with a logged, replayable seed, plus the glibc year rules.
func TestCivilString(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DUMP_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay with DUMP_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 100000 {
		sec := rng.Int64N(253402300799+62135596800) - 62135596800 // years 1..9999
		want := time.Unix(sec, 0).UTC().Format("2006-01-02 15:04:05")
		want = strings.TrimLeft(want[:4], "0") + want[4:] // strftime does not pad
		if got := civilString(sec, time.UTC); got != want {
			t.Fatalf("civilString(%d) = %q, want %q", sec, got, want)
		}
	}
	for sec, want := range map[int64]string{
		-62135596800: "1-01-01 00:00:00", 0: "1970-01-01 00:00:00", -1: "1969-12-31 23:59:59",
		253402300800: "10000-01-01 00:00:00", 67767976233532799: "2147483647-12-31 23:59:59",
		67767976233532800: "-2147483648-01-01 00:00:00",
	} {
		if got := civilString(sec, time.UTC); got != want {
			t.Errorf("civilString(%d) = %q, want %q", sec, got, want)
		}
	}
}

// TestJSONBlocks checks that every crafted leaf gives valid JSON whose
// items match the leaf, and that items with damaged payloads carry an
// error and their bytes.
func TestJSONBlocks(t *testing.T) {
	errors := 0
	for name, items := range craftedLeaves() {
		n := buildLeaf(items, 16384)
		var b bytes.Buffer
		if err := BlockJSON(&b, n, BlockOptions{CsumItems: true}); err != nil {
			t.Fatal(err)
		}
		var blk struct {
			NrItems int `json:"nritems"`
			Items   []struct {
				Slot  int             `json:"slot"`
				Kind  string          `json:"kind"`
				Data  json.RawMessage `json:"data"`
				Error string          `json:"error"`
				Raw   string          `json:"raw"`
			} `json:"items"`
		}
		if err := json.Unmarshal(b.Bytes(), &blk); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b.String())
		}
		if len(blk.Items) != blk.NrItems || blk.NrItems != n.NumItems() {
			t.Errorf("%s: %d items in JSON, nritems %d, leaf %d", name, len(blk.Items), blk.NrItems, n.NumItems())
		}
		for _, it := range blk.Items {
			if it.Error != "" {
				errors++
				if it.Raw == "" && n.ItemHeader(it.Slot).Size > 0 {
					t.Errorf("%s slot %d: error without raw bytes", name, it.Slot)
				}
			}
		}
	}
	if errors == 0 {
		t.Error("no crafted item was rejected by its JSON decoder; the damaged ones should be")
	}
}

// TestHostileBlocks runs the printers on random and truncated blocks: they
// must not panic and must end.
func TestHostileBlocks(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	base := buildLeaf(craftedLeaves()["names"], 4096)
	for i := range 2000 {
		n := bytes.Clone(base)
		for range rng.IntN(40) + 1 {
			n[rng.IntN(len(n))] = byte(rng.UintN(256))
		}
		if i%10 == 0 {
			n[0x64] = byte(rng.IntN(3))
		}
		printAll(t, n)
	}
	printAll(t, make(disk.Node, disk.HeaderSize))
	if err := Block(&bytes.Buffer{}, make(disk.Node, 10), BlockOptions{}); err == nil {
		t.Error("Block accepted a 10-byte block")
	}
}

func printAll(t *testing.T, n disk.Node) {
	t.Helper()
	var b bytes.Buffer
	if err := Block(&b, n, BlockOptions{CsumItems: true}); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := BlockJSON(&b, n, BlockOptions{}); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b.Bytes()) {
		t.Fatalf("invalid JSON: %s", b.String())
	}
}

func FuzzBlock(f *testing.F) {
	for _, items := range craftedLeaves() {
		f.Add([]byte(buildLeaf(items, 4096)))
	}
	f.Add(make([]byte, disk.HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < disk.HeaderSize || len(b) > 1<<16 {
			return
		}
		printAll(t, disk.Node(b))
	})
}

func FuzzSuper(f *testing.F) {
	sb := make([]byte, disk.SuperblockSize)
	le.PutUint64(sb[0x40:], disk.Magic)
	le.PutUint32(sb[0xa0:], 97)
	f.Add(sb)
	f.Fuzz(func(t *testing.T, b []byte) {
		raw := make([]byte, disk.SuperblockSize)
		copy(raw, b)
		var s disk.Superblock
		if err := s.Decode(raw); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := Super(&out, &s, raw, SuperOptions{Full: true}); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		if err := SuperJSON(&out, &s, raw, 0, "x"); err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out.Bytes()) {
			t.Fatalf("invalid JSON: %s", out.String())
		}
	})
}
