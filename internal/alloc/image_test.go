package alloc_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	btrfs "github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// image is a loaded filesystem plus what the tests recompute on their own.
type image struct {
	space   *alloc.Space
	sb      disk.Superblock
	extents alloc.Extents // every extent of the extent tree
	fst     *alloc.FreeSpaceTree
}

// loadImage opens path with the read-only library and loads its Space and
// free-space tree.
func loadImage(t *testing.T, path string) *image {
	t.Helper()
	fsys, err := btrfs.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	trees, err := fsview.Of(fsys).Trees()
	if err != nil {
		t.Fatal(err)
	}
	roots := map[disk.ObjectID]ctree.Root{}
	for _, tr := range trees {
		roots[tr.ID] = tr.Root
	}
	im := &image{sb: fsview.Of(fsys).Superblock()}
	r := fsview.Of(fsys).BlockReader()
	extentRoot, ok := roots[disk.ExtentTreeObjectID]
	if !ok {
		t.Fatal("no extent tree")
	}
	bgRoot := extentRoot
	if im.sb.CompatROFlags&disk.CompatROBlockGroupTree != 0 {
		bgRoot = roots[disk.BlockGroupTreeObjectID]
	}
	im.space, err = alloc.LoadFrom(r, bgRoot, extentRoot, fsview.Of(fsys).ChunkMap(), im.sb.NodeSize, im.sb.SectorSize)
	if err != nil {
		t.Fatalf("LoadFrom: %v", err)
	}
	checkLazy(t, im.space, r, bgRoot, extentRoot, fsview.Of(fsys).ChunkMap(), &im.sb)
	if fstRoot, ok := roots[disk.FreeSpaceTreeObjectID]; ok {
		if im.fst, err = alloc.LoadFreeSpaceTree(r, fstRoot, im.sb.SectorSize); err != nil {
			t.Fatalf("LoadFreeSpaceTree: %v", err)
		}
	}
	// The test's own extent list, straight from the tree.
	c := ctree.NewCursor(r, extentRoot)
	for ok, err := c.First(); ok || err != nil; ok, err = c.Next() {
		if err != nil {
			t.Fatal(err)
		}
		switch k := c.Key(); k.Type {
		case disk.ExtentItemKey:
			im.extents.Insert(uint64(k.ObjectID), uint64(k.ObjectID)+k.Offset)
		case disk.MetadataItemKey:
			im.extents.Insert(uint64(k.ObjectID), uint64(k.ObjectID)+uint64(im.sb.NodeSize))
		}
	}
	return im
}

// checkLazy loads the image's Space again lazily and wants, for every
// group, FreeBytes before loading and Free, Excluded and Used after it
// equal to the eager load's.
func checkLazy(t *testing.T, eager *alloc.Space, r ctree.Reader, bgRoot, extentRoot ctree.Root, m *chunk.Map, sb *disk.Superblock) {
	t.Helper()
	lazy, err := alloc.LoadLazy(r, bgRoot, extentRoot, nil, m, sb.NodeSize, sb.SectorSize)
	if err != nil {
		t.Fatalf("LoadLazy: %v", err)
	}
	if len(lazy.Groups()) != len(eager.Groups()) {
		t.Fatalf("LoadLazy: %d groups, LoadFrom %d", len(lazy.Groups()), len(eager.Groups()))
	}
	for i, g := range lazy.Groups() {
		e := eager.Groups()[i]
		if got, want := lazy.FreeBytes(g), e.Free.Bytes(); got != want {
			t.Errorf("group %d: FreeBytes %d before loading, LoadFrom has %d", g.Start, got, want)
		}
		if err := lazy.LoadGroup(g); err != nil {
			t.Fatalf("LoadGroup %d: %v", g.Start, err)
		}
		if !g.Free.Equal(&e.Free) || !g.Excluded.Equal(&e.Excluded) || g.Used != e.Used || g.Start != e.Start || g.Length != e.Length {
			t.Errorf("group %d: lazily free %v excluded %v used %d, LoadFrom %v %v %d", g.Start,
				g.Free.Ranges(), g.Excluded.Ranges(), g.Used, e.Free.Ranges(), e.Excluded.Ranges(), e.Used)
		}
	}
}

// bytesIn returns how many bytes of e lie in [a, b).
func bytesIn(e *alloc.Extents, a, b uint64) uint64 {
	var n uint64
	for r := range e.All() {
		if lo, hi := max(r.Start, a), min(r.End, b); lo < hi {
			n += hi - lo
		}
	}
	return n
}

// checkAccounting verifies Used against the extents, the free sets against
// the extents, and the FST against the extent tree.
func (im *image) checkAccounting(t *testing.T) {
	t.Helper()
	var total uint64
	for _, g := range im.space.Groups() {
		used := bytesIn(&im.extents, g.Start, g.End())
		if g.Used != used {
			t.Errorf("group [%d, +%d) %s: Used %d, extents sum to %d", g.Start, g.Length,
				disk.BlockGroupTypeString(g.Flags), g.Used, used)
		}
		if got := g.Length - g.Free.Bytes() - g.Excluded.Bytes(); got != used {
			t.Errorf("group %d: length - free - excluded = %d, extents %d", g.Start, got, used)
		}
		for _, set := range []*alloc.Extents{&g.Free, &g.Excluded} {
			for r := range set.All() {
				if im.extents.Overlaps(r.Start, r.End) || r.Start < g.Start || r.End > g.End() {
					t.Errorf("group %d: free/excluded range %v overlaps an extent or leaves the group", g.Start, r)
				}
			}
		}
		total += g.Used
	}
	if total != im.sb.BytesUsed {
		t.Errorf("sum of group Used %d, superblock bytes_used %d", total, im.sb.BytesUsed)
	}
	if im.fst == nil {
		t.Logf("no free space tree")
		return
	}
	if err := im.space.CompareFreeSpaceTree(im.fst); err != nil {
		t.Error(err)
	}
	for _, fg := range im.fst.Groups {
		if g := im.space.Group(fg.Start); g == nil || g.Start != fg.Start {
			t.Logf("stale free space info (%d, %d) without block group", fg.Start, fg.Length)
		}
	}
}

// exercise runs a randomized alloc/free/unpin sequence against a model:
// live allocations and the pinned set, checked against the extents that
// were on disk and the excluded ranges.
func (im *image) exercise(t *testing.T, seed uint64, steps int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0xa110c))
	s := im.space
	ns, ss := uint64(im.sb.NodeSize), uint64(im.sb.SectorSize)
	type piece struct{ addr, size uint64 }
	var live []piece
	var liveSet, pinned alloc.Extents
	for step := range steps {
		switch op := rng.IntN(10); {
		case op < 6:
			want, size, align := disk.BlockGroupMetadata, ns, ns
			switch rng.IntN(4) {
			case 2: // sector-aligned tree block: only the stripe rule keeps it in one stripe
				align = 0
			case 0:
				want, size, align = disk.BlockGroupData, ss*(1+rng.Uint64N(64)), 0
			case 1:
				if rng.IntN(8) == 0 {
					want = disk.BlockGroupSystem
				}
			}
			a, err := s.Alloc(want, size, align)
			if errors.Is(err, alloc.ErrNoSpace) {
				checkNoFit(t, s, want, size, align, ss)
				continue
			}
			if err != nil {
				t.Fatalf("step %d: Alloc: %v", step, err)
			}
			im.checkPiece(t, step, a, size, want, align, &liveSet, &pinned)
			live = append(live, piece{a, size})
			liveSet.Insert(a, a+size)
		case op < 9 && len(live) > 0:
			i := rng.IntN(len(live))
			p := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			if err := s.Free(p.addr, p.size); err != nil {
				t.Fatalf("step %d: Free: %v", step, err)
			}
			if err := s.Free(p.addr, p.size); err == nil {
				t.Fatalf("step %d: double Free accepted", step)
			}
			liveSet.Remove(p.addr, p.addr+p.size)
			pinned.Insert(p.addr, p.addr+p.size)
		default:
			s.Unpin()
			for r := range pinned.All() {
				if g := s.Group(r.Start); g == nil || !g.Free.Contains(r.Start, min(r.End, g.End())) {
					t.Fatalf("step %d: unpinned %v not free again", step, r)
				}
			}
			pinned = alloc.Extents{}
		}
		if !s.Pinned().Equal(&pinned) {
			t.Fatalf("step %d: pinned %v, model %v", step, s.Pinned().Ranges(), pinned.Ranges())
		}
	}
	for _, g := range s.Groups() {
		want := g.Length - bytesIn(&im.extents, g.Start, g.End()) - bytesIn(&liveSet, g.Start, g.End())
		if got := g.Length - g.Used; got != want {
			t.Errorf("group %d: length - used = %d, model %d", g.Start, got, want)
		}
		view := s.FreeSpaceTreeView(g)
		if view.Bytes() != want {
			t.Errorf("group %d: FST view holds %d bytes, model free %d", g.Start, view.Bytes(), want)
		}
	}
}

// checkPiece verifies one allocation against everything it must avoid.
func (im *image) checkPiece(t *testing.T, step int, a, size, want, align uint64, live, pinned *alloc.Extents) {
	t.Helper()
	end := a + size
	g := im.space.Group(a)
	what := fmt.Sprintf("step %d: Alloc(%#x, %d) = [%d, %d)", step, want, size, a, end)
	switch {
	case g == nil || end > g.End() || g.Flags&want == 0:
		t.Fatalf("%s: not inside one group of the type", what)
	case im.extents.Overlaps(a, end):
		t.Fatalf("%s overlaps an on-disk extent", what)
	case g.Excluded.Overlaps(a, end):
		t.Fatalf("%s overlaps a superblock exclusion", what)
	case pinned.Overlaps(a, end):
		t.Fatalf("%s overlaps a pinned range", what)
	case live.Overlaps(a, end):
		t.Fatalf("%s overlaps a live allocation", what)
	case g.Free.Overlaps(a, end):
		t.Fatalf("%s still free", what)
	case align > 0 && a%align != 0, a%uint64(im.sb.SectorSize) != 0:
		t.Fatalf("%s misaligned", what)
	case want != disk.BlockGroupData && (a-g.Start)/65536 != (end-1-g.Start)/65536:
		t.Fatalf("%s crosses a stripe boundary", what)
	}
}

// checkNoFit verifies an ErrNoSpace: no group of the type has a fitting range.
func checkNoFit(t *testing.T, s *alloc.Space, want, size, align, ss uint64) {
	t.Helper()
	if align == 0 {
		align = ss
	}
	for _, g := range s.Groups() {
		if g.Flags&want == 0 {
			continue
		}
		for r := range g.Free.All() {
			for a := (r.Start + align - 1) / align * align; a+size <= r.End; a += align {
				if want == disk.BlockGroupData || (a-g.Start)/65536 == (a+size-1-g.Start)/65536 {
					t.Fatalf("ErrNoSpace for %#x size %d but [%d, +%d) fits in group %d", want, size, a, size, g.Start)
				}
			}
		}
	}
}

func TestFixtures(t *testing.T) {
	seed := testSeed(t)
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			im := loadImage(t, btrfstest.OpenFixture(t, name))
			im.checkAccounting(t)
			im.exercise(t, seed, 3000)
		})
	}
}

// fill allocates blocks of type want until ErrNoSpace, checking each, then
// frees them all, unpins, and checks the same number fits again.
func (im *image) fill(t *testing.T, want, size, align uint64) int {
	t.Helper()
	s := im.space
	var live, pinned alloc.Extents
	var addrs []uint64
	for {
		a, err := s.Alloc(want, size, align)
		if errors.Is(err, alloc.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		im.checkPiece(t, len(addrs), a, size, want, align, &live, &pinned)
		live.Insert(a, a+size)
		addrs = append(addrs, a)
	}
	checkNoFit(t, s, want, size, align, uint64(im.sb.SectorSize))
	for _, a := range addrs {
		if err := s.Free(a, size); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Alloc(want, size, align); !errors.Is(err, alloc.ErrNoSpace) && len(addrs) > 0 {
		t.Fatalf("pinned space reused before Unpin (err %v)", err)
	}
	s.Unpin()
	n := 0
	for ; ; n++ {
		if _, err := s.Alloc(want, size, align); err != nil {
			break
		}
	}
	if n != len(addrs) {
		t.Fatalf("after Unpin %d blocks fit, before %d", n, len(addrs))
	}
	return n
}

func TestFixturesFill(t *testing.T) {
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			im := loadImage(t, btrfstest.OpenFixture(t, name))
			ns := uint64(im.sb.NodeSize)
			n := im.fill(t, disk.BlockGroupMetadata, ns, ns)
			if ss := uint64(im.sb.SectorSize); ns > ss {
				// Misalign the metadata free space so only the stripe rule
				// keeps sector-aligned tree blocks inside one 64 KiB stripe.
				im2 := loadImage(t, btrfstest.OpenFixture(t, name))
				a, err := im2.space.Alloc(disk.BlockGroupMetadata, ss, 0)
				if err != nil {
					t.Fatal(err)
				}
				im2.extents.Insert(a, a+ss) // treat it as on disk
				n += im2.fill(t, disk.BlockGroupMetadata, ns, 0)
			}
			n += im.fill(t, disk.BlockGroupSystem, ns, ns)
			n += im.fill(t, disk.BlockGroupData, 1<<20, 0)
			if n == 0 {
				t.Fatal("nothing allocated")
			}
		})
	}
}

// A commit seals the bytes its transaction freed; while it is on its way
// to the disk the next transaction frees more. Unpinning the sealed set
// makes exactly those bytes allocatable, never the later ones, and the
// free-space-tree view (pinned bytes count as free) does not move.
func TestSealUnpinSet(t *testing.T) {
	name := btrfstest.FixtureNames(t)[0]
	im := loadImage(t, btrfstest.OpenFixture(t, name))
	s := im.space
	size := uint64(im.sb.NodeSize)
	var addrs []uint64
	for {
		a, err := s.Alloc(disk.BlockGroupMetadata, size, size)
		if errors.Is(err, alloc.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) < 4 {
		t.Fatalf("only %d blocks allocated", len(addrs))
	}
	views := func() []alloc.Extents {
		var out []alloc.Extents
		for _, g := range s.Groups() {
			out = append(out, s.FreeSpaceTreeView(g))
		}
		return out
	}
	half := len(addrs) / 2
	for _, a := range addrs[:half] {
		if err := s.Free(a, size); err != nil {
			t.Fatal(err)
		}
	}
	sealed := s.Seal()
	if got := sealed.Bytes(); got != uint64(half)*size {
		t.Fatalf("sealed %d bytes, freed %d", got, uint64(half)*size)
	}
	for _, a := range addrs[half:] {
		if err := s.Free(a, size); err != nil {
			t.Fatal(err)
		}
	}
	before := views()
	s.UnpinSet(sealed)
	after := views()
	for i := range before {
		if !before[i].Equal(&after[i]) {
			t.Fatalf("group %d: the free-space-tree view changed when pinned bytes became free", i)
		}
	}
	n := 0
	for ; ; n++ {
		a, err := s.Alloc(disk.BlockGroupMetadata, size, size)
		if err != nil {
			break
		}
		if !sealed.Contains(a, a+size) {
			t.Fatalf("block %d handed out, but only the sealed set was unpinned", a)
		}
	}
	if n != half {
		t.Fatalf("after UnpinSet %d blocks fit, sealed %d", n, half)
	}
	s.UnpinSet(sealed) // again: already taken, nothing happens
	s.Unpin()
	n = 0
	for ; ; n++ {
		if _, err := s.Alloc(disk.BlockGroupMetadata, size, size); err != nil {
			break
		}
	}
	if n != len(addrs)-half {
		t.Fatalf("after Unpin %d blocks fit, want %d", n, len(addrs)-half)
	}
}
