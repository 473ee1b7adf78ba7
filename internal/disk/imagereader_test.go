package disk

import (
	"os"
	"sort"
	"testing"
)

// testImage is a minimal read-only view of a single-device image, enough to
// find every leaf: it maps logical to physical through the first stripe of
// each chunk, which is right for SINGLE, DUP and RAID1 chunks only.
type testImage struct {
	t      testing.TB
	f      *os.File
	sb     Superblock
	chunks []imageChunk // sorted by start
	leaves map[LogicalAddr]imageLeaf
}

type imageChunk struct {
	start, length uint64
	phys          uint64
}

// imageLeaf is one leaf and the tree it was reached from.
type imageLeaf struct {
	n    Node
	tree ObjectID
}

func openTestImage(t testing.TB, path string) *testImage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	im := &testImage{t: t, f: f, leaves: map[LogicalAddr]imageLeaf{}}
	buf := make([]byte, SuperblockSize)
	if _, err := f.ReadAt(buf, SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	if err := im.sb.Decode(buf); err != nil {
		t.Fatal(err)
	}
	if err := im.sb.Validate(SuperblockOffset); err != nil || !im.sb.CsumType.VerifyBlock(buf) {
		t.Fatalf("superblock invalid (csum ok %v): %v", im.sb.CsumType.VerifyBlock(buf), err)
	}
	sys, err := im.sb.SysChunks()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sys {
		im.addChunk(c.Key.Offset, &c.Chunk)
	}
	im.walk(im.sb.ChunkRoot, int(im.sb.ChunkRootLevel), im.sb.ChunkRootGeneration, ChunkTreeObjectID, func(n Node) {
		for i := range n.NumItems() {
			if k := n.Key(i); k.Type == ChunkItemKey {
				var c ChunkItem
				if err := c.Decode(n.ItemData(i)); err != nil {
					t.Fatal(err)
				}
				im.addChunk(k.Offset, &c)
			}
		}
	})
	im.walkAll()
	return im
}

func (im *testImage) addChunk(start uint64, c *ChunkItem) {
	if p := c.Type & BlockGroupProfileMask; p != 0 && p != BlockGroupDUP && p != BlockGroupRAID1 {
		im.t.Fatalf("chunk %d: profile %s not supported by the test reader", start, ProfileName(c.Type))
	}
	for _, old := range im.chunks {
		if old.start == start {
			return
		}
	}
	im.chunks = append(im.chunks, imageChunk{start, c.Length, uint64(c.Stripes[0].Offset)})
	sort.Slice(im.chunks, func(i, j int) bool { return im.chunks[i].start < im.chunks[j].start })
}

func (im *testImage) read(logical LogicalAddr) Node {
	im.t.Helper()
	for _, c := range im.chunks {
		if uint64(logical) >= c.start && uint64(logical) < c.start+c.length {
			b := make([]byte, im.sb.NodeSize)
			if _, err := im.f.ReadAt(b, int64(c.phys+uint64(logical)-c.start)); err != nil {
				im.t.Fatal(err)
			}
			return Node(b)
		}
	}
	im.t.Fatalf("logical %d in no chunk", logical)
	return nil
}

// walk visits every leaf of the tree rooted at root, checking each block
// against what its parent says.
func (im *testImage) walk(root LogicalAddr, level int, gen Generation, tree ObjectID, visit func(Node)) {
	im.t.Helper()
	p := BlockParams{NodeSize: int(im.sb.NodeSize), CsumType: im.sb.CsumType, FSID: im.sb.MetadataFSID(), SuperGen: im.sb.Generation}
	var rec func(addr LogicalAddr, level int, gen Generation, first *Key)
	rec = func(addr LogicalAddr, level int, gen Generation, first *Key) {
		n := im.read(addr)
		e := Expect{Bytenr: addr, Level: level, Generation: gen, Owner: tree, OwnerAny: tree.IsFSTree(), FirstKey: first}
		if err := n.Check(p, e); err != nil {
			im.t.Fatalf("tree %s: %v", tree.TreeName(), err)
		}
		if n.IsLeaf() {
			visit(n)
			return
		}
		for i := range n.NumItems() {
			kp := n.KeyPtr(i)
			rec(kp.BlockPtr, level-1, kp.Generation, &kp.Key)
		}
	}
	rec(root, level, gen, nil)
}

// walkAll records the leaves of the chunk tree, the root tree and every
// tree the root tree has a ROOT_ITEM for.
func (im *testImage) walkAll() {
	add := func(tree ObjectID) func(Node) {
		return func(n Node) {
			if _, ok := im.leaves[n.Bytenr()]; !ok {
				im.leaves[n.Bytenr()] = imageLeaf{n, tree}
			}
		}
	}
	im.walk(im.sb.ChunkRoot, int(im.sb.ChunkRootLevel), im.sb.ChunkRootGeneration, ChunkTreeObjectID, add(ChunkTreeObjectID))
	var roots []struct {
		id ObjectID
		r  RootItem
	}
	im.walk(im.sb.Root, int(im.sb.RootLevel), im.sb.Generation, RootTreeObjectID, func(n Node) {
		add(RootTreeObjectID)(n)
		for i := range n.NumItems() {
			if k := n.Key(i); k.Type == RootItemKey {
				var r RootItem
				if err := r.Decode(n.ItemData(i)); err != nil {
					im.t.Fatal(err)
				}
				roots = append(roots, struct {
					id ObjectID
					r  RootItem
				}{k.ObjectID, r})
			}
		}
	})
	for _, r := range roots {
		im.walk(r.r.Bytenr, int(r.r.Level), r.r.Generation, r.id, add(r.id))
	}
}

// itemParams are the CheckItem parameters for a leaf of tree.
func (im *testImage) itemParams(tree ObjectID) ItemCheckParams {
	return ItemCheckParams{SectorSize: im.sb.SectorSize, NodeSize: im.sb.NodeSize, CsumType: im.sb.CsumType,
		SuperGen: im.sb.Generation, Tree: tree}
}
