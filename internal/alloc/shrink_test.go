package alloc

import (
	"testing"

	"github.com/gobtrfs/btrfs/internal/chunk"
)

// TestShrinkGroup cuts and removes groups of a synthetic Space: never
// below an allocated or pinned byte, and free/excluded ranges past the
// cut disappear.
func TestShrinkGroup(t *testing.T) {
	const mib = 1 << 20
	s := &Space{nodesize: 4096, sectorsize: 4096}
	if err := s.AddGroup(mib, 8*mib, 4, []chunk.Range{{Start: 7 * mib, Length: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddGroup(9*mib, 8*mib, 1, nil); err != nil {
		t.Fatal(err)
	}
	g := s.Group(mib)
	if got := s.UsedEnd(g); got != mib {
		t.Fatalf("UsedEnd of an empty group %d, want its start", got)
	}
	var last uint64
	for i := 0; i < 10; i++ {
		a, err := s.Alloc(4, 4096, 4096)
		if err != nil {
			t.Fatal(err)
		}
		last = a + 4096
	}
	if got := s.UsedEnd(g); got != last {
		t.Fatalf("UsedEnd %d, want %d", got, last)
	}
	if err := s.ShrinkGroup(mib, last-mib-4096); err == nil {
		t.Fatal("cut below an allocated block accepted")
	}
	if err := s.ShrinkGroup(mib, 4097); err == nil {
		t.Fatal("cut to a length that is not a sector multiple accepted")
	}
	if err := s.Free(last-4096, 4096); err != nil {
		t.Fatal(err)
	}
	if got := s.UsedEnd(g); got != last {
		t.Fatalf("UsedEnd %d with the last block pinned, want %d", got, last)
	}
	s.Unpin()
	if got := s.UsedEnd(g); got != last-4096 {
		t.Fatalf("UsedEnd %d after unpin, want %d", got, last-4096)
	}
	if err := s.ShrinkGroup(mib, mib); err != nil {
		t.Fatal(err)
	}
	if g.Length != mib || g.Excluded.Len() != 0 || g.Free.Overlaps(2*mib, 9*mib) {
		t.Fatalf("after cut: length %d, excluded %v, free %v", g.Length, g.Excluded.Ranges(), g.Free.Ranges())
	}
	if err := s.RemoveGroup(mib); err == nil {
		t.Fatal("removal of a used group accepted")
	}
	if err := s.RemoveGroup(5 * mib); err == nil {
		t.Fatal("removal of a group that does not start there accepted")
	}
	if err := s.RemoveGroup(9 * mib); err != nil {
		t.Fatal(err)
	}
	if len(s.Groups()) != 1 || s.Group(9*mib) != nil {
		t.Fatalf("groups after removal: %d", len(s.Groups()))
	}
}

// TestReadOnlyAndDropGroup: a read-only group takes no allocation (the
// next group of the type does, or ErrNoSpace), and DropGroup removes a
// group whose bytes were all freed, pinned ones with it, but not one
// still used.
func TestReadOnlyAndDropGroup(t *testing.T) {
	const mib = 1 << 20
	s := &Space{nodesize: 4096, sectorsize: 4096}
	for _, start := range []uint64{mib, 9 * mib} {
		if err := s.AddGroup(start, 8*mib, 4, nil); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.Alloc(4, 4096, 4096)
	if err != nil || a != mib {
		t.Fatalf("first allocation at %d, %v", a, err)
	}
	g := s.Group(mib)
	g.ReadOnly = true
	b, err := s.Alloc(4, 4096, 4096)
	if err != nil || b < 9*mib {
		t.Fatalf("allocation with the first group read-only at %d, %v", b, err)
	}
	if err := s.DropGroup(mib); err == nil {
		t.Fatal("dropped a group with a used block")
	}
	if err := s.Free(a, 4096); err != nil {
		t.Fatal(err)
	}
	if err := s.DropGroup(mib); err != nil {
		t.Fatalf("drop the emptied group (its block pinned): %v", err)
	}
	if s.Group(mib) != nil || s.Pinned().Overlaps(mib, 9*mib) {
		t.Fatal("the dropped group or its pinned bytes remain")
	}
	s.Group(9 * mib).ReadOnly = true
	if _, err := s.Alloc(4, 4096, 4096); err != ErrNoSpace {
		t.Fatalf("allocation with every group read-only: %v, want ErrNoSpace", err)
	}
}
