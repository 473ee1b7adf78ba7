package ctree

import (
	"bytes"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestTakeChanged: TakeChanged hands out each private block made or
// write-locked since the last call once, as it is then; blocks not
// touched since are left out, and so are blocks freed meanwhile.
func TestTakeChanged(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	key := func(i int) disk.Key { return disk.Key{ObjectID: disk.ObjectID(256 + i), Type: disk.InodeItemKey} }
	e.tx.TakeChanged() // whatever making the tree took
	if err := e.tree.InsertItem(e.tx, key(0), []byte("zero")); err != nil {
		t.Fatal(err)
	}
	root := e.tree.Root().Addr
	got := e.tx.TakeChanged()
	if len(got) != 1 || got[0].Addr != root || got[0].Node.NumItems() != 1 {
		t.Fatalf("after one insert: %d blocks", len(got))
	}
	first := got[0].Node
	if again := e.tx.TakeChanged(); len(again) != 0 {
		t.Fatalf("untouched blocks handed out again: %d", len(again))
	}
	if err := e.tree.InsertItem(e.tx, key(1), []byte("one")); err != nil {
		t.Fatal(err)
	}
	got = e.tx.TakeChanged()
	if len(got) != 1 || got[0].Node.NumItems() != 2 {
		t.Fatalf("after a second insert: %d blocks", len(got))
	}
	if first.NumItems() != 1 || bytes.Equal(first, got[0].Node) {
		t.Fatal("an earlier copy changed with the block")
	}
	// Enough items for splits: every block of the grown tree is handed
	// out, the leaf split away from included, and nothing twice.
	for i := 2; i < 400; i++ {
		if err := e.tree.InsertItem(e.tx, key(i), bytes.Repeat([]byte{byte(i)}, 20)); err != nil {
			t.Fatal(err)
		}
	}
	got = e.tx.TakeChanged()
	seen := map[disk.LogicalAddr]bool{}
	for _, c := range got {
		if seen[c.Addr] {
			t.Fatalf("block %d handed out twice", c.Addr)
		}
		seen[c.Addr] = true
	}
	if e.tree.Root().Level == 0 || !seen[e.tree.Root().Addr] || len(got) < 3 {
		t.Fatalf("after splits: %d blocks, root level %d", len(got), e.tree.Root().Level)
	}
}
