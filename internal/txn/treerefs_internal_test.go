package txn

import (
	"errors"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestApplyTreeRefDeltaSpill: references go inline while the extent item
// stays below the room (224 bytes with 4 KiB nodes: 22 in a skinny item),
// past it into items of their own; a removal finds a reference where it
// is, and a freed inline slot takes the next addition.
func TestApplyTreeRefDeltaSpill(t *testing.T) {
	maxItem := disk.LeafDataSize(4096)/16 - disk.ItemSize
	x := &treeExtent{item: &disk.ExtentItem{Flags: disk.ExtentFlagTreeBlock}}
	add := func(rs ...treeRef) error {
		d := &treeRefDelta{refs: map[treeRef]int{}}
		for _, r := range rs {
			d.refs[r]++
		}
		return applyTreeRefDelta(1<<20, x, d, maxItem)
	}
	drop := func(r treeRef) error {
		return applyTreeRefDelta(1<<20, x, &treeRefDelta{refs: map[treeRef]int{r: -1}}, maxItem)
	}
	root := func(id uint64) treeRef { return treeRef{disk.TreeBlockRefKey, id} }
	var rs []treeRef
	for id := uint64(256); id < 286; id++ {
		rs = append(rs, root(id))
	}
	rs = append(rs, treeRef{disk.SharedBlockRefKey, 1 << 30})
	if err := add(rs...); err != nil {
		t.Fatal(err)
	}
	if len(x.item.InlineRefs) != 22 || len(x.keyed) != 9 || x.item.Refs != 31 {
		t.Fatalf("31 references: %d inline, %d items, refs %d; want 22, 9, 31", len(x.item.InlineRefs), len(x.keyed), x.item.Refs)
	}
	if x.item.Size() >= maxItem {
		t.Fatalf("extent item of %d bytes, room %d", x.item.Size(), maxItem)
	}
	if err := disk.CheckInlineRefOrder(x.item.InlineRefs); err != nil {
		t.Fatal(err)
	}
	// The first added (in key order) are inline; the shared one, last
	// in key order, is an item.
	if !x.has(root(256)) || !x.has(treeRef{disk.SharedBlockRefKey, 1 << 30}) || x.keyed[len(x.keyed)-1].typ != disk.SharedBlockRefKey {
		t.Fatalf("placement: inline %v, items %v", x.item.InlineRefs, x.keyed)
	}
	// A keyed one goes from the items, an inline one from the item.
	if err := drop(root(285)); err != nil {
		t.Fatal(err)
	}
	if err := drop(root(256)); err != nil {
		t.Fatal(err)
	}
	if len(x.item.InlineRefs) != 21 || len(x.keyed) != 8 || x.item.Refs != 29 || x.has(root(285)) || x.has(root(256)) {
		t.Fatalf("after two drops: %d inline, %d items, refs %d", len(x.item.InlineRefs), len(x.keyed), x.item.Refs)
	}
	// The freed inline slot takes the next one.
	if err := add(root(300)); err != nil {
		t.Fatal(err)
	}
	if len(x.item.InlineRefs) != 22 || len(x.keyed) != 8 {
		t.Fatalf("after an addition: %d inline, %d items", len(x.item.InlineRefs), len(x.keyed))
	}
	if err := add(root(257)); err == nil {
		t.Fatal("reference added twice: no error")
	}
	if err := drop(root(999)); !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("dropping a reference the block does not have: %v, want ErrCorrupt", err)
	}
}
