package ctree

import (
	"errors"
	"slices"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// fuzzNodeSize is the block size of the fuzz target: small blocks keep
// the fuzzer fast and still reach every layout case.
const fuzzNodeSize = 4096

// writtenBlocks returns blocks ctree wrote: the leaves and nodes of a tree
// with small, large and empty items, committed to a MemStore.
func writtenBlocks(tb testing.TB) [][]byte {
	e := newEnv(tb, fuzzNodeSize, Options{})
	for i := 0; i < 400; i++ {
		size := []int{0, 8, 53, 300, 1500}[i%5]
		e.mustInsert(disk.Key{ObjectID: 256 + disk.ObjectID(i%7), Type: disk.ExtentDataKey, Offset: uint64(i)}, size)
	}
	e.commit()
	var out [][]byte
	for _, b := range e.store.blocks {
		out = append(out, slices.Clone(b))
	}
	slices.SortFunc(out, func(a, b []byte) int { return int(a[offLevel]) - int(b[offLevel]) })
	if len(out) > 12 {
		out = append(out[:6], out[len(out)-6:]...)
	}
	return out
}

// FuzzBlock feeds arbitrary bytes, starting from blocks ctree wrote, to the
// block decoder (disk.Node.Check and the accessors) and, when they pass, to
// the engine as the root of a committed tree. Nothing may panic; errors
// must wrap disk.ErrCorrupt; a block the checks accept must support
// lookups, inserts and deletes, and a tree that verified before them must
// verify after.
func FuzzBlock(f *testing.F) {
	for _, b := range writtenBlocks(f) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		block := make([]byte, fuzzNodeSize)
		copy(block, in)
		const addr = disk.LogicalAddr(1 << 30)
		// Make the identity fields right so the fuzzer spends its time on
		// the structure, then seal it with a valid checksum.
		copy(block[offFSID:], testFSID[:])
		le.PutUint64(block[offBytenr:], uint64(addr))
		gen := disk.Generation(le.Uint64(block[offGen:]))
		if gen == 0 || gen > 1<<40 {
			gen = 5
			le.PutUint64(block[offGen:], uint64(gen))
		}
		disk.CsumCRC32C.SumBlock(block)
		n := disk.Node(block)
		e := disk.Expect{Bytenr: addr, Level: -1}
		if err := n.Check(disk.BlockParams{NodeSize: fuzzNodeSize, CsumType: disk.CsumCRC32C, FSID: testFSID}, e); err != nil {
			if !errors.Is(err, disk.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		for i := 0; i < n.NumItems(); i++ {
			_ = n.Key(i)
			if n.IsLeaf() {
				_ = n.ItemData(i)
			} else {
				_ = n.KeyPtr(i)
			}
		}
		fuzzEngine(t, block, addr, gen)
	})
}

// fuzzEngine opens block as the committed root of a tree and changes it.
func fuzzEngine(t *testing.T, block []byte, addr disk.LogicalAddr, gen disk.Generation) {
	store := NewMemStore(Params{NodeSize: fuzzNodeSize, FSID: testFSID, ChunkTreeUUID: testChunkUUID})
	store.blocks[addr] = block
	store.live[addr] = true
	tx := NewTrans(store, gen+1, nil)
	n := disk.Node(block)
	tree, err := Open(tx, Root{Addr: addr, Level: n.Level(), Generation: gen, Owner: n.Owner()}, Options{})
	if err != nil {
		if !errors.Is(err, disk.ErrCorrupt) {
			t.Fatalf("open: %v", err)
		}
		return
	}
	validBefore := tree.Verify(tx) == nil
	keys := []disk.Key{{}, disk.MaxKey, {ObjectID: 256, Type: disk.ExtentDataKey, Offset: 7}}
	if n.NumItems() > 0 {
		keys = append(keys, n.Key(0), n.Key(n.NumItems()-1))
	}
	for i, k := range keys {
		if _, _, err := tree.Lookup(tx, k); err != nil {
			checkFuzzErr(t, "lookup", err)
			return
		}
		if i%2 == 0 {
			if _, err := tree.DeleteItem(tx, k); err != nil {
				checkFuzzErr(t, "delete", err)
				return
			}
		} else if err := tree.InsertItem(tx, k, make([]byte, 40*i)); err != nil && !errors.Is(err, ErrExist) {
			checkFuzzErr(t, "insert", err)
			return
		}
	}
	if validBefore {
		if err := tree.Verify(tx); err != nil {
			t.Fatalf("valid tree broken by changes: %v", err)
		}
	}
}

// checkFuzzErr accepts only corruption found in the input (a node's
// children do not exist in the store).
func checkFuzzErr(t *testing.T, op string, err error) {
	if !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("%s: %v", op, err)
	}
}
