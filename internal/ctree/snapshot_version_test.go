package ctree

import (
	"bytes"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestSnapshotVersion: a copy stays valid while its block is unchanged,
// also through a write lock that changed nothing (the bytes are
// compared), and a change, or another block at the address, makes a new
// copy.
func TestSnapshotVersion(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	key := func(i int) disk.Key { return disk.Key{ObjectID: disk.ObjectID(256 + i), Type: disk.InodeItemKey} }
	if err := e.tree.InsertItem(e.tx, key(0), []byte("zero")); err != nil {
		t.Fatal(err)
	}
	addr := e.tree.Root().Addr
	n, v, ok := e.tx.SnapshotVersion(addr, BlockVersion{}, nil)
	if !ok || n == nil {
		t.Fatal("no first copy")
	}
	if m, v2, ok := e.tx.SnapshotVersion(addr, v, n); !ok || m != nil || v2 != v {
		t.Fatal("unchanged block copied again")
	}
	// A write lock that changes nothing: the version moves, the bytes
	// do not, so no copy.
	if err := e.tree.UpdateItem(e.tx, key(0), func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	m, v3, ok := e.tx.SnapshotVersion(addr, v, n)
	if !ok || m != nil || v3 == v {
		t.Fatalf("write lock without a change: copy %v, version moved %v", m != nil, v3 != v)
	}
	// A change: a new copy with the new bytes.
	if err := e.tree.InsertItem(e.tx, key(1), []byte("one")); err != nil {
		t.Fatal(err)
	}
	m, v4, ok := e.tx.SnapshotVersion(addr, v3, n)
	if !ok || m == nil || v4 == v3 || bytes.Equal(m, n) || m.NumItems() != 2 {
		t.Fatal("changed block not copied")
	}
	// A copy kept at the version of one block never stands for another
	// block at the same address.
	if _, _, ok := e.tx.SnapshotVersion(addr+disk.LogicalAddr(1<<20), v4, m); ok {
		t.Fatal("an address the table does not hold answered")
	}
	other := BlockVersion{b: &block{}, mod: v4.mod}
	if m2, _, _ := e.tx.SnapshotVersion(addr, other, m); m2 == nil {
		t.Fatal("a copy of another block taken for this one")
	}
}
