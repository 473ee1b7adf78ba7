package dump

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// Crafted blocks: the tests below overwrite the fs tree's root leaf of a
// fresh mkfs.btrfs image with items built here (every item type, damaged
// sizes, odd values), fix the checksum, and compare what
// `btrfs inspect-internal dump-tree -b` prints for it with Block. progs
// reads the block from the image, so its own quirks are what is compared.

// craftItem is one item of a crafted leaf.
type craftItem struct {
	key  disk.Key
	data []byte
}

func ci(id uint64, t disk.KeyType, off uint64, data []byte) craftItem {
	return craftItem{disk.Key{ObjectID: disk.ObjectID(id), Type: t, Offset: off}, data}
}

// craftFS is a mkfs.btrfs image whose fs tree root block is rewritten.
type craftFS struct {
	path   string
	addr   disk.LogicalAddr
	phys   []int64 // every copy of the block on the (single) device
	header []byte  // the block's original header
	sb     disk.Superblock
}

func newCraftFS(t *testing.T, opts btrfstest.MkfsOptions) *craftFS {
	t.Helper()
	path := btrfstest.Mkfs(t, opts)
	fsys, err := btrfs.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	trees, err := fsview.Of(fsys).Trees()
	if err != nil {
		t.Fatal(err)
	}
	c := &craftFS{path: path, sb: fsview.Of(fsys).Superblock()}
	for _, tr := range trees {
		if tr.ID == disk.FSTreeObjectID {
			c.addr = tr.Root.Addr
		}
	}
	mp, err := fsview.Of(fsys).ChunkMap().Mirrors(c.addr, uint64(c.sb.NodeSize))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range mp.Copies {
		c.phys = append(c.phys, int64(l.Physical))
	}
	n, err := fsview.Of(fsys).ReadBlockAt(c.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.header = append([]byte(nil), n[:disk.HeaderSize]...)
	return c
}

// leaf builds a leaf holding items (sorted by key), with the original
// header and the given header changes applied.
func (c *craftFS) leaf(t *testing.T, items []craftItem) disk.Node {
	t.Helper()
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b craftItem) int { return a.key.Compare(b.key) })
	n := make(disk.Node, c.sb.NodeSize)
	copy(n, c.header)
	le.PutUint32(n[0x60:], uint32(len(items)))
	n[0x64] = 0
	end := len(n) - disk.HeaderSize
	for i, it := range items {
		end -= len(it.data)
		if end < disk.ItemSize*(i+1) {
			t.Fatalf("crafted items do not fit a %d-byte leaf", len(n))
		}
		disk.PutItemHeader(n, i, disk.Item{Key: it.key, Offset: uint32(end), Size: uint32(len(it.data))})
		copy(n[disk.HeaderSize+end:], it.data)
	}
	c.sb.CsumType.SumBlock(n)
	return n
}

// write puts block n (whose checksum is already set) on every copy.
func (c *craftFS) write(t *testing.T, n disk.Node) {
	t.Helper()
	f, err := os.OpenFile(c.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range c.phys {
		if _, err := f.WriteAt(n, p); err != nil {
			t.Fatal(err)
		}
	}
}

// progsEnv is the environment progs runs in: dates in UTC, as the tests
// print them with time.UTC.
func progsEnv() []string { return append(os.Environ(), "TZ=UTC", "LC_ALL=C") }

// runProgs runs `btrfs args...` and returns its standard output. A
// non-zero exit is not an error: progs exits 1 after printing in several
// of the cases compared.
func runProgs(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("btrfs", args...)
	cmd.Env = progsEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("btrfs %v: %v", args, err)
		}
	}
	return out.String()
}

// compareBlock writes n into the image, and compares progs' -b output with
// Block's.
func (c *craftFS) compareBlock(t *testing.T, name string, n disk.Node, o BlockOptions, extra ...string) {
	t.Helper()
	c.write(t, n)
	args := append([]string{"inspect-internal", "dump-tree", "-b", itoa(uint64(c.addr))}, extra...)
	want := runProgs(t, append(args, c.path)...)
	var got bytes.Buffer
	got.WriteString(ProgsBanner + "\n")
	if o.Location == nil {
		o.Location = time.UTC
	}
	o.CsumType, o.SectorSize = c.sb.CsumType, c.sb.SectorSize
	if err := Block(&got, n, o); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if d := btrfstest.LineDiff(want, got.String()); d != "" {
		t.Errorf("%s: output differs from btrfs-progs (-want +got):\n%s", name, d)
	}
}
