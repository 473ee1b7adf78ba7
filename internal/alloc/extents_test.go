package alloc_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gobtrfs/btrfs/internal/alloc"
)

// bitModel is the brute-force reference for Extents: one bool per byte of a
// small universe.
type bitModel []bool

func (m bitModel) set(a, b uint64, v bool) {
	for i := a; i < b && i < uint64(len(m)); i++ {
		m[i] = v
	}
}

func (m bitModel) all(a, b uint64, v bool) bool {
	for i := a; i < b; i++ {
		if m[i] != v {
			return false
		}
	}
	return true
}

func (m bitModel) ranges() []alloc.Range {
	var out []alloc.Range
	for i := 0; i < len(m); {
		if !m[i] {
			i++
			continue
		}
		j := i
		for j < len(m) && m[j] {
			j++
		}
		out = append(out, alloc.Range{Start: uint64(i), End: uint64(j)})
		i = j
	}
	return out
}

func (m bitModel) find(size, align, from uint64) (uint64, bool) {
	if size == 0 {
		return 0, false
	}
	for a := from; a+size <= uint64(len(m)); a++ {
		if align > 1 && a%align != 0 {
			continue
		}
		if m.all(a, a+size, true) {
			return a, true
		}
	}
	return 0, false
}

func TestExtentsModel(t *testing.T) {
	seed := testSeed(t)
	for round := range 200 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		const n = 300
		m := make(bitModel, n)
		var e alloc.Extents
		for step := range 200 {
			a := rng.Uint64N(n)
			b := a + rng.Uint64N(min(n-a, 40)+1)
			switch op := rng.IntN(5); op {
			case 0, 1:
				e.Insert(a, b)
				m.set(a, b, true)
			case 2:
				e.Remove(a, b)
				m.set(a, b, false)
			case 3:
				if got, want := e.Contains(a, b), m.all(a, b, true); got != want {
					t.Fatalf("round %d step %d: Contains(%d,%d) = %v, want %v", round, step, a, b, got, want)
				}
				if got, want := e.Overlaps(a, b), a < b && !m.all(a, b, false); got != want {
					t.Fatalf("round %d step %d: Overlaps(%d,%d) = %v, want %v", round, step, a, b, got, want)
				}
			case 4:
				size, align := rng.Uint64N(20), []uint64{0, 1, 2, 4, 8, 3}[rng.IntN(6)]
				ga, gok := e.Find(size, align, a)
				wa, wok := m.find(size, align, a)
				if ga != wa || gok != wok {
					t.Fatalf("round %d step %d: Find(%d,%d,%d) = %d,%v want %d,%v", round, step, size, align, a, ga, gok, wa, wok)
				}
			}
			checkSame(t, &e, m, round, step)
		}
	}
}

func checkSame(t *testing.T, e *alloc.Extents, m bitModel, round, step int) {
	t.Helper()
	want := m.ranges()
	got := e.Ranges()
	if len(got) != len(want) || e.Len() != len(want) {
		t.Fatalf("round %d step %d: ranges %v, want %v", round, step, got, want)
	}
	var bytes uint64
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("round %d step %d: ranges %v, want %v", round, step, got, want)
		}
		bytes += want[i].Len()
	}
	if e.Bytes() != bytes {
		t.Fatalf("round %d step %d: Bytes %d, want %d", round, step, e.Bytes(), bytes)
	}
	i := 0
	for r := range e.All() {
		if r != want[i] {
			t.Fatalf("round %d step %d: All()[%d] = %v, want %v", round, step, i, r, want[i])
		}
		i++
	}
}

func TestExtentsEdges(t *testing.T) {
	var e alloc.Extents
	e.Insert(10, 10) // empty: ignored
	e.Insert(20, 10) // inverted: ignored
	if e.Len() != 0 {
		t.Fatalf("empty inserts kept: %v", e.Ranges())
	}
	e.Insert(0, 10)
	e.Insert(10, 20) // touching merges
	if r := e.Ranges(); len(r) != 1 || r[0] != (alloc.Range{Start: 0, End: 20}) {
		t.Fatalf("touching ranges not merged: %v", r)
	}
	e.Insert(^uint64(0)-10, ^uint64(0))
	if _, ok := e.Find(8, 1<<63, ^uint64(0)-9); ok {
		t.Fatal("Find past the top of the address space succeeded")
	}
	if a, ok := e.Find(4, 8, 1); !ok || a != 8 {
		t.Fatalf("Find(4, 8, 1) = %d, %v; want 8", a, ok)
	}
	c := e.Clone()
	e.Remove(0, ^uint64(0))
	if e.Len() != 0 || c.Len() != 2 {
		t.Fatalf("Remove all / Clone: %v %v", e.Ranges(), c.Ranges())
	}
}
