package alloc

import "testing"

func TestPinFreeAndTake(t *testing.T) {
	s := &Space{nodesize: 4096, sectorsize: 4096}
	g := &BlockGroup{Start: 1 << 20, Length: 1 << 20, Flags: 4}
	g.Free.Insert(g.Start, g.End())
	s.groups = []*BlockGroup{g}
	if err := s.PinFree(g.Start, 4096); err != nil {
		t.Fatal(err)
	}
	if err := s.PinFree(g.Start, 4096); err == nil {
		t.Fatal("pinned twice")
	}
	if err := s.Take(g.Start+4096, 8192); err != nil {
		t.Fatal(err)
	}
	if g.Used != 8192 {
		t.Fatalf("used %d", g.Used)
	}
	if all, any, _ := s.IsFree(g.Start, 4*4096); all || !any {
		t.Fatalf("IsFree = %v %v", all, any)
	}
	fst := s.FreeSpaceTreeView(g)
	if !fst.Contains(g.Start, g.Start+4096) || fst.Overlaps(g.Start+4096, g.Start+3*4096) {
		t.Fatalf("fst view %v", fst.Ranges())
	}
	set := s.Seal()
	s.UnpinSet(set)
	if all, _, _ := s.IsFree(g.Start, 4096); !all {
		t.Fatal("pinned log block not free after UnpinSet")
	}
	if err := s.Take(2<<20, 4096); err == nil {
		t.Fatal("take outside groups")
	}
}
