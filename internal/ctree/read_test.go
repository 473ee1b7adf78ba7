package ctree

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// memReader is a Reader over a map, checking blocks as a real reader would.
type memReader struct {
	p      disk.BlockParams
	blocks map[disk.LogicalAddr][]byte
}

func (m *memReader) ReadBlock(addr disk.LogicalAddr, e disk.Expect) (disk.Node, error) {
	b, ok := m.blocks[addr]
	if !ok {
		return nil, fmt.Errorf("no block %d", addr)
	}
	n := disk.Node(b)
	if err := n.Check(m.p, e); err != nil {
		return nil, err
	}
	return n, nil
}

// bulkBuild packs sorted keys into leaves of at most per items and builds
// nodes above them with at most fan pointers each; it returns the root.
func bulkBuild(m *memReader, keys []disk.Key, per, fan int) Root {
	next := disk.LogicalAddr(1 << 20)
	newBlock := func(level, nr int) []byte {
		b := make([]byte, m.p.NodeSize)
		h := disk.Header{FSID: m.p.FSID, Bytenr: next, Flags: disk.DefaultHeaderFlags, Generation: 7,
			Owner: disk.FSTreeObjectID, NumItems: uint32(nr), Level: uint8(level)}
		h.Encode(b)
		next += disk.LogicalAddr(m.p.NodeSize)
		return b
	}
	type ref struct {
		k    disk.Key
		addr disk.LogicalAddr
	}
	var refs []ref
	for i := 0; i < len(keys) || i == 0; i += per {
		chunk := keys[i:min(i+per, len(keys))]
		b := newBlock(0, len(chunk))
		end := uint32(disk.LeafDataSize(m.p.NodeSize))
		for j, k := range chunk {
			end -= 8
			disk.PutItemHeader(b, j, disk.Item{Key: k, Offset: end, Size: 8})
			copy(b[disk.HeaderSize+int(end):], fmt.Appendf(nil, "%08d", k.Offset%1e8))
		}
		m.p.CsumType.SumBlock(b)
		addr := disk.Node(b).Bytenr()
		m.blocks[addr] = b
		var k disk.Key
		if len(chunk) > 0 {
			k = chunk[0]
		}
		refs = append(refs, ref{k, addr})
		if len(keys) == 0 {
			break
		}
	}
	level := 0
	for len(refs) > 1 {
		level++
		var up []ref
		for i := 0; i < len(refs); i += fan {
			grp := refs[i:min(i+fan, len(refs))]
			b := newBlock(level, len(grp))
			for j, r := range grp {
				disk.PutKeyPtr(b, j, disk.KeyPtr{Key: r.k, BlockPtr: r.addr, Generation: 7})
			}
			m.p.CsumType.SumBlock(b)
			addr := disk.Node(b).Bytenr()
			m.blocks[addr] = b
			up = append(up, ref{grp[0].k, addr})
		}
		refs = up
	}
	return Root{Addr: refs[0].addr, Level: level, Generation: 7, Owner: disk.FSTreeObjectID}
}

func newMemReader() *memReader {
	return &memReader{p: disk.BlockParams{NodeSize: 4096, CsumType: disk.CsumCRC32C, FSID: disk.UUID{1, 2, 3}},
		blocks: map[disk.LogicalAddr][]byte{}}
}

func TestCursorAgainstSortedSlice(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, n := range []int{0, 1, 5, 100, 3000} {
		m := newMemReader()
		keys := make([]disk.Key, n)
		for i := range keys {
			keys[i] = disk.Key{ObjectID: disk.ObjectID(256 + i/3), Type: disk.ExtentDataKey, Offset: uint64(i%3) * 4096}
		}
		root := bulkBuild(m, keys, 5+r.IntN(40), 3+r.IntN(5)) // at most 7 levels for 3000 keys
		c := NewCursor(m, root)
		// Forward iteration visits every key in order.
		i := 0
		for ok, err := c.First(); ok || err != nil; ok, err = c.Next() {
			if err != nil {
				t.Fatal(err)
			}
			if c.Key() != keys[i] {
				t.Fatalf("n=%d item %d: key %v, want %v", n, i, c.Key(), keys[i])
			}
			i++
		}
		if i != n {
			t.Fatalf("n=%d: iterated %d items", n, i)
		}
		// Backward iteration.
		i = n - 1
		for ok, err := c.Last(); ok || err != nil; ok, err = c.Prev() {
			if err != nil {
				t.Fatal(err)
			}
			if c.Key() != keys[i] {
				t.Fatalf("n=%d backward item %d: key %v, want %v", n, i, c.Key(), keys[i])
			}
			i--
		}
		if i != -1 {
			t.Fatalf("n=%d: backward stopped at %d", n, i)
		}
		// Random seeks, probing keys between and on existing ones.
		for q := 0; q < 200 && n > 0; q++ {
			probe := keys[r.IntN(n)]
			probe.Offset += uint64(r.IntN(3)) - 1
			ge, le := -1, -1
			for j, k := range keys {
				if ge < 0 && !k.Less(probe) {
					ge = j
				}
				if !probe.Less(k) {
					le = j
				}
			}
			ok, err := c.Seek(probe)
			if err != nil || ok != (ge >= 0) || (ok && c.Key() != keys[ge]) {
				t.Fatalf("Seek(%v) = %v %v, want index %d", probe, ok, err, ge)
			}
			ok, err = c.SeekLE(probe)
			if err != nil || ok != (le >= 0) || (ok && c.Key() != keys[le]) {
				t.Fatalf("SeekLE(%v) = %v %v, want index %d", probe, ok, err, le)
			}
		}
	}
}

func TestCursorCorruptChild(t *testing.T) {
	m := newMemReader()
	keys := make([]disk.Key, 200)
	for i := range keys {
		keys[i] = disk.Key{ObjectID: disk.ObjectID(300 + i), Type: disk.InodeItemKey}
	}
	root := bulkBuild(m, keys, 10, 4)
	// Flip a byte in some leaf: the walk must report corruption, not panic.
	for addr, b := range m.blocks {
		if disk.Node(b).IsLeaf() && addr != root.Addr {
			b[200] ^= 0xff
			break
		}
	}
	err := Walk(m, root, func(disk.Node, int) error { return nil })
	if !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("Walk on corrupt tree: %v", err)
	}
}
