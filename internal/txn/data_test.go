package txn_test

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// refTriple is an EXTENT_DATA_REF triple of the model.
type refTriple struct {
	root, ino disk.ObjectID
	offset    uint64
}

// extentState is what the extent tree says about one data extent.
type extentState struct {
	numBytes uint64
	refs     map[refTriple]uint64
	keyed    int // keyed EXTENT_DATA_REF items
}

// readDataExtents returns every data extent of the committed extent tree
// with its refs (inline and keyed), checking that Refs matches them.
func readDataExtents(t *testing.T, fs *txn.FS) map[disk.LogicalAddr]*extentState {
	t.Helper()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	et, err := tx.Tree(disk.ExtentTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[disk.LogicalAddr]*extentState{}
	totals := map[disk.LogicalAddr]uint64{}
	err = et.Range(tx.Trans(), disk.Key{}, disk.Key{ObjectID: ^disk.ObjectID(0), Type: 0xff, Offset: ^uint64(0)},
		func(k disk.Key, data []byte) (bool, error) {
			a := disk.LogicalAddr(k.ObjectID)
			switch k.Type {
			case disk.ExtentItemKey:
				var it disk.ExtentItem
				if err := it.Decode(data); err != nil {
					return false, err
				}
				if it.Flags&disk.ExtentFlagData == 0 {
					return true, nil
				}
				if err := disk.CheckInlineRefOrder(it.InlineRefs); err != nil {
					return false, fmt.Errorf("extent %d: %w", a, err)
				}
				x := &extentState{numBytes: k.Offset, refs: map[refTriple]uint64{}}
				for _, r := range it.InlineRefs {
					x.refs[refTriple{r.Data.Root, r.Data.ObjectID, r.Data.Offset}] += uint64(r.Data.Count)
				}
				out[a], totals[a] = x, it.Refs
			case disk.ExtentDataRefKey:
				var rs disk.ExtentDataRefs
				if err := rs.Decode(data); err != nil {
					return false, err
				}
				x := out[a]
				if x == nil {
					return false, fmt.Errorf("keyed ref %v without extent item", k)
				}
				for _, r := range rs {
					if r.Hash() != k.Offset {
						return false, fmt.Errorf("keyed ref %v holds hash %#x", k, r.Hash())
					}
					x.refs[refTriple{r.Root, r.ObjectID, r.Offset}] += uint64(r.Count)
				}
				x.keyed++
			}
			return true, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	for a, x := range out {
		var n uint64
		for _, c := range x.refs {
			n += c
		}
		if n != totals[a] {
			t.Fatalf("extent %d: refs %d, back-references %d", a, totals[a], n)
		}
	}
	return out
}

// dataUsed sums used over the DATA block groups.
func dataUsed(fs *txn.FS) uint64 {
	var n uint64
	for _, g := range fs.Space().Groups() {
		if g.Flags&disk.BlockGroupData != 0 {
			n += g.Used
		}
	}
	return n
}

// refModel is the expected reference state.
type refModel struct {
	extents map[disk.LogicalAddr]*extentState
}

// TestDataRefsModel runs random reference changes over several commits
// and compares the extent tree with a model after each: counts, inline
// order, keyed refs when an extent has many, extents and space gone when
// their count reaches zero. Replay with GOBTRFS_SEED.
func TestDataRefsModel(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewSource(seed(t)))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096})
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	base := dataUsed(fs)
	m := refModel{extents: map[disk.LogicalAddr]*extentState{}}
	for round := 0; round < 6; round++ {
		tx, err := fs.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for op := 0; op < 40; op++ {
			modelStep(t, tx, rng, &m)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("round %d: commit: %v", round, err)
		}
		compareModel(t, fs, &m, base)
	}
	// Drop everything: all space must come back.
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for a, x := range m.extents {
		for k, c := range x.refs {
			if err := tx.DropDataRef(a, x.numBytes, k.root, k.ino, k.offset, uint32(c)); err != nil {
				t.Fatal(err)
			}
		}
		delete(m.extents, a)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	compareModel(t, fs, &m, base)
}

// modelStep makes one random change in tx and in m.
func modelStep(t *testing.T, tx *txn.Txn, rng *rand.Rand, m *refModel) {
	t.Helper()
	ss := uint64(tx.SectorSize())
	addrs := make([]disk.LogicalAddr, 0, len(m.extents))
	for a := range m.extents {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	switch r := rng.Intn(10); {
	case r < 2 || len(addrs) == 0: // new extent
		n := ss * uint64(1+rng.Intn(8))
		a, err := tx.AllocData(n, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rng.Intn(4) == 0 {
			if err := tx.ReleaseData(a, n); err != nil {
				t.Fatal(err)
			}
			return
		}
		k := refTriple{5, disk.ObjectID(257 + rng.Intn(4)), ss * uint64(rng.Intn(16))}
		if err := tx.AddDataRef(a, n, k.root, k.ino, k.offset, 1); err != nil {
			t.Fatal(err)
		}
		m.extents[a] = &extentState{numBytes: n, refs: map[refTriple]uint64{k: 1}}
	case r < 7: // add a ref to an existing extent
		a := addrs[rng.Intn(len(addrs))]
		x := m.extents[a]
		k := refTriple{5, disk.ObjectID(257 + rng.Intn(20)), ss * uint64(rng.Intn(64))}
		c := uint32(1 + rng.Intn(2))
		if err := tx.AddDataRef(a, x.numBytes, k.root, k.ino, k.offset, c); err != nil {
			t.Fatal(err)
		}
		x.refs[k] += uint64(c)
	default: // drop a ref
		a := addrs[rng.Intn(len(addrs))]
		x := m.extents[a]
		keys := make([]refTriple, 0, len(x.refs))
		for k := range x.refs {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(p, q refTriple) int {
			if c := cmp.Compare(p.ino, q.ino); c != 0 {
				return c
			}
			return cmp.Compare(p.offset, q.offset)
		})
		k := keys[rng.Intn(len(keys))]
		if err := tx.DropDataRef(a, x.numBytes, k.root, k.ino, k.offset, 1); err != nil {
			t.Fatal(err)
		}
		if x.refs[k]--; x.refs[k] == 0 {
			delete(x.refs, k)
		}
		if len(x.refs) == 0 {
			delete(m.extents, a)
		}
	}
}

// compareModel checks the committed extent tree and space against m.
func compareModel(t *testing.T, fs *txn.FS, m *refModel, base uint64) {
	t.Helper()
	got := readDataExtents(t, fs)
	var want uint64
	keyed := 0
	for a, x := range m.extents {
		want += x.numBytes
		g := got[a]
		if g == nil {
			t.Fatalf("extent %d missing", a)
		}
		if g.numBytes != x.numBytes || fmt.Sprint(g.refs) != fmt.Sprint(x.refs) {
			t.Fatalf("extent %d: got %d bytes refs %v, want %d bytes %v", a, g.numBytes, g.refs, x.numBytes, x.refs)
		}
		keyed += g.keyed
	}
	for a := range got {
		if m.extents[a] == nil {
			t.Fatalf("extent %d should be gone", a)
		}
	}
	if u := dataUsed(fs); u != base+want {
		t.Fatalf("data used %d, want %d + %d", u, base, want)
	}
	t.Logf("%d extents, %d keyed ref items", len(got), keyed)
}

// csumModel maps a sector's logical address to its sum.
type csumModel map[uint64][]byte

// readCsums returns the csum tree's sums per sector and checks the items:
// no overlap, none larger than a leaf allows, sorted.
func readCsums(t *testing.T, fs *txn.FS) csumModel {
	t.Helper()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	ct, err := tx.Tree(disk.CsumTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	cs, ss := tx.CsumType().Size(), uint64(tx.SectorSize())
	maxItem := (disk.LeafDataSize(int(fs.Super().NodeSize))-2*disk.ItemSize)/cs*cs - cs
	out := csumModel{}
	var prevEnd uint64
	err = ct.Range(tx.Trans(), disk.Key{}, disk.Key{ObjectID: ^disk.ObjectID(0), Type: 0xff, Offset: ^uint64(0)},
		func(k disk.Key, data []byte) (bool, error) {
			if k.Type != disk.ExtentCsumKey {
				return true, nil
			}
			if k.Offset < prevEnd || len(data) > maxItem || len(data)%cs != 0 {
				return false, fmt.Errorf("csum item %v of %d bytes after end %d", k, len(data), prevEnd)
			}
			for i := 0; i < len(data)/cs; i++ {
				out[k.Offset+uint64(i)*ss] = bytes.Clone(data[i*cs : (i+1)*cs])
			}
			prevEnd = k.Offset + uint64(len(data)/cs)*ss
			return true, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCsumsModel adds and deletes random checksum ranges (overlapping,
// touching, long enough to need several items) over several commits and
// compares the csum tree with a model. Replay with GOBTRFS_SEED.
func TestCsumsModel(t *testing.T) {
	btrfstest.RequireProgs(t)
	rng := rand.New(rand.NewSource(seed(t)))
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096, Csum: "sha256"})
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	want := readCsums(t, fs)
	const base = 1 << 40 // far from anything mkfs wrote
	for round := 0; round < 5; round++ {
		tx, err := fs.Begin()
		if err != nil {
			t.Fatal(err)
		}
		cs, ss := tx.CsumType().Size(), uint64(tx.SectorSize())
		for op := 0; op < 25; op++ {
			start := base + ss*uint64(rng.Intn(2000))
			n := 1 + rng.Intn(300)
			if rng.Intn(3) == 0 {
				if err := tx.DeleteCsums(disk.LogicalAddr(start), uint64(n)*ss); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n; i++ {
					delete(want, start+uint64(i)*ss)
				}
				continue
			}
			sums := make([]byte, n*cs)
			rng.Read(sums)
			if err := tx.AddCsums(disk.LogicalAddr(start), sums); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				want[start+uint64(i)*ss] = sums[i*cs : (i+1)*cs]
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		got := readCsums(t, fs)
		if len(got) != len(want) {
			t.Fatalf("round %d: %d sums, want %d", round, len(got), len(want))
		}
		for a, s := range want {
			if !bytes.Equal(got[a], s) {
				t.Fatalf("round %d: sum of sector %d is %x, want %x", round, a, got[a], s)
			}
		}
	}
}

// TestDataAPIErrors checks that misuse is refused.
func TestDataAPIErrors(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	ss := uint64(tx.SectorSize())
	if _, err := tx.AllocData(ss+1, 0); err == nil {
		t.Error("unaligned AllocData accepted")
	}
	a, err := tx.AllocData(4*ss, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.WriteData(a+disk.LogicalAddr(4*ss), make([]byte, ss)); err == nil {
		t.Error("write outside the allocation accepted")
	}
	if err := tx.WriteData(a, make([]byte, ss-1)); err == nil {
		t.Error("unaligned write accepted")
	}
	if err := tx.ReleaseData(a, 8*ss); err == nil {
		t.Error("release of more than reserved accepted")
	}
	if err := tx.AddCsums(a, make([]byte, tx.CsumType().Size()+1)); err == nil {
		t.Error("partial csum accepted")
	}
	if err := tx.AddDataRef(a, 4*ss, 5, 257, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.AddDataRef(a, 2*ss, 5, 257, 0, 1); err == nil {
		t.Error("ref with another length accepted")
	}
	if err := tx.ReleaseData(a, 4*ss); err == nil {
		t.Error("release of a referenced range accepted")
	}
	// A committed extent that does not exist: Commit must fail.
	if err := tx.AddDataRef(disk.LogicalAddr(1<<40), ss, 5, 257, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err == nil {
		t.Error("commit with a ref to a missing extent succeeded")
	}
	// Dropping more than exist fails too.
	tx, err = fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	b, err := tx.AllocData(ss, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.AddDataRef(b, ss, 5, 257, 0, 1)
	_ = tx.DropDataRef(b, ss, 5, 258, 0, 1)
	if err := tx.Commit(); err == nil {
		t.Error("commit dropping a missing ref succeeded")
	}
}

// TestDataAbort writes data, references and checksums and aborts: the
// image must pass btrfs check with the old accounting, and the space is
// allocatable again.
func TestDataAbort(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	used := dataUsed(fs)
	gen := fs.Generation()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(64 << 10)
	a, err := tx.AllocData(n, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte{0xa5}, int(n))
	if err := tx.WriteData(a, p); err != nil {
		t.Fatal(err)
	}
	var sums []byte
	for off := 0; off < len(p); off += int(tx.SectorSize()) {
		sums = tx.CsumType().Sum(sums, p[off:off+int(tx.SectorSize())])
	}
	if err := tx.AddCsums(a, sums); err != nil {
		t.Fatal(err)
	}
	if err := tx.AddDataRef(a, n, 5, 257, 0, 1); err != nil {
		t.Fatal(err)
	}
	tx.Abort()
	if fs.Generation() != gen || dataUsed(fs) != used {
		t.Fatalf("after abort: generation %d used %d, want %d and %d", fs.Generation(), dataUsed(fs), gen, used)
	}
	if err := tx.AddDataRef(a, n, 5, 257, 0, 1); err == nil {
		t.Error("AddDataRef after abort accepted")
	}
	tx, err = fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	b, err := tx.AllocData(n, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b != a {
		t.Errorf("aborted data space not reused: got %d, want %d", b, a)
	}
	tx.Abort()
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
}

// TestDataFitsExact: on a small image filled 256 KiB at a time, DataFits
// says yes exactly as long as AllocData can still hand the bytes out
// (DataAvailable, an upper bound, may promise device scraps no chunk
// takes), and DataFreeInGroups and GrowData agree with it.
func TestDataFitsExact(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 128 << 20})
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	const n = 256 << 10
	total := uint64(0)
	for {
		fits, err := tx.DataFits(n)
		if err != nil {
			t.Fatal(err)
		}
		if !fits {
			break
		}
		// What fits may be in pieces: the write path halves a request
		// the allocator cannot give whole.
		for got := uint64(0); got < n; {
			size := uint64(n) - got
			for {
				if _, err := tx.AllocData(size, 0); err == nil {
					break
				} else if size == uint64(tx.SectorSize()) {
					t.Fatalf("DataFits(%d) after %d bytes, but AllocData(%d) fails: %v", n, total, size, err)
				}
				size /= 2
			}
			got += size
		}
		total += n
		if total > 1<<30 {
			t.Fatal("DataFits never says no")
		}
	}
	free, mixed := tx.DataFreeInGroups()
	if mixed || free >= n {
		t.Errorf("DataFits says no with %d bytes free in the groups (mixed %v)", free, mixed)
	}
	if err := tx.GrowData(); err == nil {
		t.Error("GrowData added a chunk after DataFits said no")
	}
	if _, err := tx.AllocData(n, 0); err == nil {
		t.Errorf("AllocData(%d) works after DataFits said no (%d bytes handed out)", n, total)
	}
	t.Logf("%d bytes fit", total)
}
