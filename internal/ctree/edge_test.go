package ctree

import (
	"bytes"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Edge cases of the balancing code, each set up exactly with 4 KiB blocks
// (leaf data size 3995: 31 items of 100 data bytes use 3875) and checked
// through the Stats counters and the resulting blocks.

const edgeSize = 100 // item data bytes; 125 with the header

func ek(i int) disk.Key { return disk.Key{ObjectID: 256, Type: disk.ExtentDataKey, Offset: uint64(i)} }

func (e *env) mustInsert(k disk.Key, size int) {
	e.tb.Helper()
	if err := e.tree.InsertItem(e.tx, k, payload(k, 0, size)); err != nil {
		e.tb.Fatalf("insert %v: %v", k, err)
	}
}

func (e *env) mustDelete(k disk.Key) {
	e.tb.Helper()
	if found, err := e.tree.DeleteItem(e.tx, k); err != nil || !found {
		e.tb.Fatalf("delete %v: found %v, %v", k, found, err)
	}
}

// leaves returns the tree's leaves, left to right.
func (e *env) leaves() []*block {
	var out []*block
	var walk func(b *block)
	walk = func(b *block) {
		if b.level() == 0 {
			out = append(out, b)
			return
		}
		for i := 0; i < b.nritems(); i++ {
			c, err := e.tree.readChild(e.tx, b, i)
			if err != nil {
				e.tb.Fatal(err)
			}
			walk(c)
		}
	}
	walk(e.tree.root.Load())
	return out
}

// leafKeys returns the item offsets of ek keys in leaf b.
func leafKeys(b *block) []int {
	var out []int
	for i := 0; i < b.nritems(); i++ {
		out = append(out, int(b.itemKey(i).Offset))
	}
	return out
}

// delta runs fn and returns what it added to the counters.
func (e *env) delta(fn func()) StatsSnapshot {
	before := e.stats.Snapshot()
	fn()
	return e.stats.Snapshot().Sub(before)
}

// twoLeaves builds a root node over two leaves: L holds 31 items (full:
// 120 bytes free) with keys 0, 1, 100, 101, ... 1400, 1401, 1500; R holds
// 16 items with keys 1600 .. 3100 (1995 bytes free). Everything is
// committed, so the first change copies the blocks it touches.
func twoLeaves(t *testing.T, opts Options) *env {
	e := newEnv(t, 4096, opts)
	for i := 0; i < 32; i++ {
		e.mustInsert(ek(100*i), edgeSize)
	}
	for i := 0; i < 15; i++ {
		e.mustInsert(ek(100*i+1), edgeSize)
	}
	e.verify()
	e.commit()
	ls := e.leaves()
	if len(ls) != 2 || ls[0].nritems() != 31 || ls[0].freeSpace() != 120 || ls[1].nritems() != 16 {
		t.Fatalf("setup: leaves %v\n%s", len(ls), e.dump())
	}
	return e
}

func TestShortcutTaken(t *testing.T) {
	for _, private := range []bool{false, true} {
		e := twoLeaves(t, Options{})
		if private {
			// Make every block private to this transaction first, so
			// the only difference the insert can make is a real change.
			e.mustInsert(ek(3500), 0)
			e.mustDelete(ek(3500))
			e.mustInsert(ek(2), 0)
			e.mustDelete(ek(2))
		}
		left := e.leaves()[0]
		leftBytes := append([]byte(nil), left.buf...)
		d := e.delta(func() { e.mustInsert(ek(1550), edgeSize) })
		// L is the root's slot 0: the descent restarts once to
		// write-lock the root for a possible key fix-up.
		want := StatsSnapshot{Searches: 1, SearchRestarts: 1, SplitLeaf: 1, PushLeafRight: 1, PushLeafRightShortcut: 1, PushLeafRightAtEnd: 1}
		if !private {
			// root, L (by the search) and R (by the push)
			want.BlocksCowed, want.BlocksAllocated, want.BlocksFreed = 3, 3, 3
		}
		if d != want {
			t.Errorf("private %v: counters %+v, want %+v", private, d, want)
		}
		ls := e.leaves()
		l, r := ls[0], ls[1]
		if private {
			if l != left || !bytes.Equal(l.buf, leftBytes) {
				t.Errorf("left leaf changed")
			}
		} else if !bytes.Equal(l.buf[hdr:], leftBytes[hdr:]) || l.nritems() != 31 {
			t.Errorf("left leaf items changed")
		}
		if r.nritems() != 17 || r.itemKey(0) != ek(1550) {
			t.Errorf("right leaf %v", leafKeys(r))
		}
		e.verify()
	}
}

func TestShortcutOff(t *testing.T) {
	e := twoLeaves(t, Options{NoPushRightShortcut: true})
	d := e.delta(func() { e.mustInsert(ek(1550), edgeSize) })
	if d.PushLeafRight != 1 || d.PushLeafRightShortcut != 0 || d.ItemsMoved != 1 || d.BytesMoved != edgeSize+ih ||
		d.LeafSplits != 0 || d.PushLeafLeft != 0 {
		t.Errorf("counters %+v", d)
	}
	ls := e.leaves()
	if got := leafKeys(ls[1]); got[0] != 1500 || got[1] != 1550 || ls[0].nritems() != 30 {
		t.Errorf("leaves %v | %v", leafKeys(ls[0]), got)
	}
	e.verify()
}

func TestShortcutNotTakenRightFull(t *testing.T) {
	e := twoLeaves(t, Options{})
	for i := 0; i < 15; i++ {
		e.mustInsert(ek(1600+100*i+1), edgeSize) // R: 31 items, full
	}
	e.commit()
	d := e.delta(func() { e.mustInsert(ek(1550), edgeSize) })
	// L is the first child: no left push is possible either, so it splits.
	if d.PushLeafRight != 1 || d.PushLeafRightShortcut != 0 || d.PushLeafRightAtEnd != 1 || d.PushLeafRightAtEndNoRoom != 1 ||
		d.BlocksCowed != 2 || d.PushLeafLeft != 1 || d.ItemsMoved != 0 || d.LeafSplits != 1 {
		t.Errorf("counters %+v", d)
	}
	if n := len(e.leaves()); n != 3 {
		t.Errorf("%d leaves, want 3", n)
	}
	e.verify()
}

func TestShortcutNotTakenSlotInside(t *testing.T) {
	e := twoLeaves(t, Options{})
	d := e.delta(func() { e.mustInsert(ek(751), edgeSize) })
	// The new item goes to slot 16 and stays in L. The push moves every
	// item after the slot that fits (14: 1401..801), stopping at the slot
	// because L would end up roomier than R.
	if d.PushLeafRight != 1 || d.PushLeafRightShortcut != 0 || d.PushLeafRightAtEnd != 0 || d.PushLeafRightAtEndNoRoom != 0 ||
		d.ItemsMoved != 14 || d.LeafSplits != 0 {
		t.Errorf("counters %+v", d)
	}
	ls := e.leaves()
	if ls[0].nritems() != 18 || ls[0].itemKey(16) != ek(751) || ls[1].itemKey(0) != ek(801) {
		t.Errorf("leaves %v | %v", leafKeys(ls[0]), leafKeys(ls[1]))
	}
	e.verify()
}

func TestShortcutNotTakenNoRightNeighbour(t *testing.T) {
	e := twoLeaves(t, Options{})
	for i := 0; i < 15; i++ {
		e.mustInsert(ek(1600+100*i+1), edgeSize) // R: full
	}
	e.commit()
	// Append past R's last key: R is the last child.
	d := e.delta(func() { e.mustInsert(ek(5000), edgeSize) })
	if d.PushLeafRight != 1 || d.PushLeafRightShortcut != 0 || d.PushLeafRightAtEnd != 1 || d.PushLeafRightAtEndNoSibling != 1 ||
		d.PushLeafLeft != 1 || d.LeafSplits != 1 {
		t.Errorf("counters %+v", d)
	}
	e.verify()
}

func TestShortcutNotTakenWhenEmptying(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	for i := 0; i < 32; i++ {
		e.mustInsert(ek(100*i), edgeSize)
	}
	e.commit()
	// L: keys 0..1500 (16 items), R: 1600..3100. Delete L's last items:
	// at 10 items L falls under a third full, the slot is past its end,
	// and it has no left sibling, so everything goes right.
	var d StatsSnapshot
	for i := 15; i >= 10; i-- {
		s := e.delta(func() { e.mustDelete(ek(100 * i)) })
		d.PushLeafRightShortcut += s.PushLeafRightShortcut
		d.ItemsMoved += s.ItemsMoved
		d.Merges += s.Merges
	}
	if d.PushLeafRightShortcut != 0 || d.ItemsMoved != 10 || d.Merges != 1 {
		t.Errorf("counters %+v", d)
	}
	ls := e.leaves()
	if len(ls) != 1 || ls[0].nritems() != 26 {
		t.Errorf("leaves: %d, first has %d items", len(ls), ls[0].nritems())
	}
	if r := e.tree.Root(); r.Level != 1 {
		t.Errorf("root level %d before the next delete", r.Level)
	}
	e.verify()
	// The root node has one pointer left: the next delete descent
	// promotes the leaf to root.
	d = e.delta(func() { e.mustDelete(ek(1600)) })
	if d.RootShrinks != 1 || e.tree.Root().Level != 0 {
		t.Errorf("root collapse: %+v, level %d", d, e.tree.Root().Level)
	}
	e.verify()
}

func TestDoubleSplit(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	for i := 0; i < 31; i++ {
		e.mustInsert(ek(10*i), edgeSize)
	}
	e.commit()
	big := 3000
	d := e.delta(func() { e.mustInsert(ek(145), big) })
	if d.DoubleSplits != 1 || d.LeafSplits != 2 || d.PushForDoubleSplit != 1 || d.RootGrows != 1 {
		t.Errorf("counters %+v", d)
	}
	ls := e.leaves()
	if len(ls) != 3 || ls[0].nritems() != 15 || ls[1].nritems() != 1 || ls[1].itemSize(0) != big || ls[2].nritems() != 16 {
		t.Errorf("leaves:\n%s", e.dump())
	}
	e.verify()
}

// oneItemLeaves inserts n items so large that each leaf holds one.
func oneItemLeaves(e *env, n int) {
	for i := 0; i < n; i++ {
		e.mustInsert(ek(i), 1990)
	}
}

func TestNodeSplitAndPush(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	np := disk.MaxKeyPtrs(4096) // 121
	oneItemLeaves(e, np-3)
	if r := e.tree.Root(); r.Level != 1 {
		t.Fatalf("root level %d", r.Level)
	}
	e.commit()
	d := e.delta(func() { e.mustInsert(ek(np-3), 1990) })
	if d.NodeSplits != 1 || d.RootGrows != 1 || e.tree.Root().Level != 2 {
		t.Errorf("root split: %+v, level %d", d, e.tree.Root().Level)
	}
	e.verify()
	// Appending fills the right node to NP-3; its left sibling has room,
	// so pointers are pushed left instead of splitting.
	d = e.delta(func() {
		for i := np - 2; i < np+60; i++ {
			e.mustInsert(ek(i), 1990)
		}
	})
	if d.NodePushes == 0 || d.NodeSplits != 0 {
		t.Errorf("node push: %+v", d)
	}
	e.verify()
}

func TestNodeMergeAndRootCollapse(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	np := disk.MaxKeyPtrs(4096)
	oneItemLeaves(e, np-2) // root split: two level-1 nodes of 59 and 60
	e.commit()
	if r := e.tree.Root(); r.Level != 2 {
		t.Fatalf("root level %d", r.Level)
	}
	var d StatsSnapshot
	// Delete from the end: the right node shrinks to NP/4 and is merged
	// into its left sibling; the root then has one pointer and collapses.
	for i := np - 3; i >= 40; i-- {
		s := e.delta(func() { e.mustDelete(ek(i)) })
		d.Merges += s.Merges
		d.RootShrinks += s.RootShrinks
		if i%7 == 0 {
			e.verify()
		}
	}
	if d.Merges == 0 || d.RootShrinks == 0 || e.tree.Root().Level != 1 {
		t.Errorf("counters %+v, root level %d", d, e.tree.Root().Level)
	}
	e.verify()
	// Delete everything: the tree ends as one empty root leaf.
	for i := 39; i >= 0; i-- {
		e.mustDelete(ek(i))
	}
	if r := e.tree.Root(); r.Level != 0 {
		t.Errorf("root level %d", r.Level)
	}
	if n := e.leaves()[0].nritems(); n != 0 {
		t.Errorf("%d items left", n)
	}
	e.verify()
	e.commit()
	e.verify()
}

// TestCOWRules checks the copy-on-write rules: committed blocks are copied
// on first change and pinned, private blocks change in place, and written
// blocks are copied again even in the same transaction.
func TestCOWRules(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	for i := 0; i < 60; i++ {
		e.mustInsert(ek(i), 50) // two leaves under a root node
	}
	e.commit()
	old := e.tree.Root()
	d := e.delta(func() { e.mustInsert(ek(1000), 50) })
	if d.BlocksCowed != 2 || d.BlocksFreed != 2 {
		t.Errorf("first change: %+v", d)
	}
	d = e.delta(func() { e.mustInsert(ek(1001), 50) })
	if d.BlocksCowed != 0 {
		t.Errorf("second change COWed %d blocks", d.BlocksCowed)
	}
	// The old root is pinned, still readable until commit.
	if _, err := e.store.ReadBlock(old.Addr, old.expect()); err != nil {
		t.Errorf("old root unreadable before commit: %v", err)
	}
	if _, err := e.tx.WriteDirty(); err != nil {
		t.Fatal(err)
	}
	d = e.delta(func() { e.mustInsert(ek(1002), 50) })
	if d.BlocksCowed != 2 {
		t.Errorf("change after write-out COWed %d blocks, want 2", d.BlocksCowed)
	}
	e.verify()
	root := e.tree.Root()
	e.commit()
	if _, err := e.store.ReadBlock(old.Addr, old.expect()); err == nil {
		t.Errorf("old root still readable after commit")
	}
	if got := len(e.committedItems(root)); got != 63 {
		t.Errorf("committed tree has %d items", got)
	}
}
