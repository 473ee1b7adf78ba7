package ctree

import (
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestTreeStats: two trees of one transaction count into their own Stats
// (Options.Stats, kept across transactions by the caller), and the two add
// up to the transaction's Stats, blocks written included.
func TestTreeStats(t *testing.T) {
	store := NewMemStore(Params{NodeSize: 4096, FSID: testFSID, ChunkTreeUUID: testChunkUUID})
	txStats := new(Stats)
	aStats, bStats := new(Stats), new(Stats)
	var roots [2]Root
	gen := disk.Generation(10)
	for round := range 3 {
		tx := NewTrans(store, gen, txStats)
		var trees [2]*Tree
		for i, st := range []*Stats{aStats, bStats} {
			owner := disk.ObjectID(256 + i)
			var err error
			if round == 0 {
				trees[i], err = Create(tx, owner, Options{Stats: st})
			} else {
				trees[i], err = Open(tx, roots[i], Options{Stats: st})
			}
			if err != nil {
				t.Fatal(err)
			}
			if trees[i].Stats() != st {
				t.Fatalf("tree %d counts elsewhere", i)
			}
		}
		// Tree a gets twice the items of tree b, so their counters differ.
		for k := range 400 {
			for i, n := range []int{2, 1} {
				for j := range n {
					key := disk.Key{ObjectID: disk.ObjectID(round*10000 + k*2 + j), Type: disk.ExtentDataKey}
					if err := trees[i].InsertItem(tx, key, make([]byte, 60)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if _, err := tx.WriteDirty(); err != nil {
			t.Fatal(err)
		}
		store.Commit(gen)
		gen++
		roots = [2]Root{trees[0].Root(), trees[1].Root()}
	}
	total, a, b := txStats.Snapshot(), aStats.Snapshot(), bStats.Snapshot()
	if a.SplitLeaf <= b.SplitLeaf || b.SplitLeaf == 0 {
		t.Errorf("split_leaf a %d b %d: want a > b > 0", a.SplitLeaf, b.SplitLeaf)
	}
	if sum := addSnapshots(a, b); sum != total {
		t.Errorf("trees add up to\n%+v\ntransaction counted\n%+v", sum, total)
	}
	if a.BlocksWritten == 0 || b.BlocksWritten == 0 {
		t.Errorf("blocks written a %d b %d", a.BlocksWritten, b.BlocksWritten)
	}
}

// addSnapshots adds two snapshots field by field (Sub's inverse).
func addSnapshots(a, b StatsSnapshot) StatsSnapshot {
	var zero StatsSnapshot
	return a.Sub(zero.Sub(b))
}
