package ctree

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestIterate walks a three-level tree forward with Next and backward with
// Prev and PrevLeaf, from every kind of starting point, within a
// transaction and after commit.
func TestIterate(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 3))
	e := newEnv(t, 4096, Options{})
	m := model{}
	for len(m) < 20000 {
		k := randKey(r, 50, 100000)
		if _, ok := m[k]; ok {
			continue
		}
		d := payload(k, 1, r.IntN(40))
		e.mustInsertData(k, d)
		m[k] = d
	}
	want := m.sorted()
	for pass := 0; pass < 2; pass++ {
		if h := e.tree.Root().Level; h < 2 {
			t.Fatalf("height %d", h+1)
		}
		// Forward from the start.
		var p Path
		if _, err := e.tree.Search(e.tx, &p, disk.Key{}, 0, false); err != nil {
			t.Fatal(err)
		}
		i := 0
		for ok := p.Valid(); ok; i++ {
			if p.Key() != want[i].k {
				t.Fatalf("forward %d: %v, want %v", i, p.Key(), want[i].k)
			}
			var err error
			if ok, err = e.tree.Next(e.tx, &p); err != nil {
				t.Fatal(err)
			}
		}
		p.Release()
		if i != len(want) {
			t.Fatalf("forward: %d items, want %d", i, len(want))
		}
		// Backward from past the end.
		if _, err := e.tree.Search(e.tx, &p, disk.MaxKey, 0, false); err != nil {
			t.Fatal(err)
		}
		i = len(want) - 1
		for {
			ok, err := e.tree.Prev(e.tx, &p)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if p.Key() != want[i].k {
				t.Fatalf("backward %d: %v, want %v", i, p.Key(), want[i].k)
			}
			i--
		}
		p.Release()
		if i != -1 {
			t.Fatalf("backward stopped at %d", i)
		}
		// PrevLeaf from random points lands on the item before the
		// leaf's first key.
		for j := 0; j < 200; j++ {
			idx := r.IntN(len(want))
			if _, err := e.tree.Search(e.tx, &p, want[idx].k, 0, false); err != nil {
				t.Fatal(err)
			}
			first := p.Leaf().Key(0)
			ok, err := e.tree.PrevLeaf(e.tx, &p)
			if err != nil {
				t.Fatal(err)
			}
			pos := 0
			for pos < len(want) && want[pos].k.Less(first) {
				pos++
			}
			if pos == 0 {
				if ok {
					t.Fatalf("PrevLeaf before the first leaf found %v", p.Key())
				}
			} else if !ok || p.Key() != want[pos-1].k {
				t.Fatalf("PrevLeaf from %v: ok %v", first, ok)
			}
			p.Release()
		}
		// Range over a window.
		lo, hi := want[1000].k, want[2500].k
		n := 0
		if err := e.tree.Range(e.tx, lo, hi, func(k disk.Key, d []byte) (bool, error) {
			if k != want[1000+n].k {
				t.Fatalf("range %d: %v", n, k)
			}
			n++
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != 1501 {
			t.Fatalf("range: %d items", n)
		}
		e.commit()
	}
}

func (e *env) mustInsertData(k disk.Key, d []byte) {
	e.tb.Helper()
	if err := e.tree.InsertItem(e.tx, k, d); err != nil {
		e.tb.Fatalf("insert %v: %v", k, err)
	}
}

// TestItemErrors checks the errors of the item operations.
func TestItemErrors(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	for i := 0; i < 200; i++ {
		e.mustInsert(ek(2*i), 30)
	}
	max := disk.MaxItemDataSize(4096)
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	check("insert existing", e.tree.InsertItem(e.tx, ek(10), nil), ErrExist)
	check("insert too large", e.tree.InsertItem(e.tx, ek(11), make([]byte, max+1)), ErrOverflow)
	check("extend missing", e.tree.ExtendItem(e.tx, ek(11), 10, nil), ErrNotFound)
	check("extend past a leaf", e.tree.ExtendItem(e.tx, ek(10), max, nil), ErrOverflow)
	check("update missing", e.tree.UpdateItem(e.tx, ek(11), func([]byte) error { return nil }), ErrNotFound)
	_, err := e.tree.TruncateItem(e.tx, ek(11), 0, true)
	check("truncate missing", err, ErrNotFound)
	check("split missing", e.tree.SplitItem(e.tx, ek(11), ek(12), 0), ErrNotFound)
	check("split onto next key", e.tree.SplitItem(e.tx, ek(10), ek(12), 5), ErrExist)
	check("duplicate onto next key", e.tree.DuplicateItem(e.tx, ek(10), ek(12)), ErrExist)
	check("batch into existing", e.tree.InsertItems(e.tx, []Item{{Key: ek(13)}, {Key: ek(14)}}), ErrExist)
	if found, err := e.tree.DeleteItem(e.tx, ek(11)); found || err != nil {
		t.Errorf("delete missing: %v %v", found, err)
	}
	// Inserting the largest item fits in a leaf of its own.
	e.mustInsert(ek(1001), max)
	if _, err := e.tree.TruncateItem(e.tx, ek(1001), max-100, false); err != nil {
		t.Error(err)
	}
	if _, found, _ := e.tree.Lookup(e.tx, ek(1101)); !found {
		t.Errorf("truncate from the front did not move the key")
	}
	e.verify()
}
