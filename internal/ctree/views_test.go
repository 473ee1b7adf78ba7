package ctree

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// viewReader reads a tree as publication v saw it: the transaction's
// kept versions, the store for committed blocks.
type viewReader struct {
	e *env
	v uint64
}

func (r viewReader) ReadBlock(addr disk.LogicalAddr, x disk.Expect) (disk.Node, error) {
	if n, ok := r.e.tx.ReadAt(addr, r.v); ok {
		if err := n.CheckExpect(r.e.store.BlockParams(), x); err != nil {
			return nil, err
		}
		return n, nil
	}
	return r.e.store.ReadBlock(addr, x)
}

// readAll lists a tree's items through r.
func readAll(t *testing.T, r Reader, root Root) map[disk.Key]string {
	t.Helper()
	got := map[disk.Key]string{}
	c := NewCursor(r, root)
	ok, err := c.First()
	for ; ok && err == nil; ok, err = c.Next() {
		got[c.Key()] = string(c.Data())
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestViewVersions: a publication's view reads the tree as it was then
// while later changes (inserts that split, deletes that merge and free
// blocks whose addresses come back at once, updates, a commit) go on;
// Trim drops exactly what no live view reads, and a view no longer live
// is not kept. Random, with the seed printed.
func TestViewVersions(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	e := newEnv(t, 4096, Options{})
	model := map[disk.Key]string{}
	key := func(i int) disk.Key { return disk.Key{ObjectID: disk.ObjectID(256 + i), Type: disk.InodeItemKey} }

	type view struct {
		v     uint64
		root  Root
		items map[disk.Key]string
	}
	var views []view
	live := func() []uint64 {
		var l []uint64
		for _, w := range views {
			l = append(l, w.v)
		}
		slices.Sort(l)
		return slices.Compact(l)
	}
	check := func(when string) {
		for _, w := range views {
			got := readAll(t, viewReader{e, w.v}, w.root)
			if len(got) != len(w.items) {
				t.Fatalf("%s: view %d reads %d items, had %d", when, w.v, len(got), len(w.items))
			}
			for k, d := range w.items {
				if got[k] != d {
					t.Fatalf("%s: view %d: item %v is %q, was %q", when, w.v, k, got[k], d)
				}
			}
		}
	}
	for round := 0; round < 3; round++ {
		for step := 0; step < 1500; step++ {
			i := rng.IntN(600)
			switch op := rng.IntN(10); {
			case op < 5:
				if _, ok := model[key(i)]; ok {
					continue
				}
				d := fmt.Sprintf("%d.%d.%s", i, step, bytes.Repeat([]byte{'x'}, rng.IntN(150)))
				if err := e.tree.InsertItem(e.tx, key(i), []byte(d)); err != nil {
					t.Fatal(err)
				}
				model[key(i)] = d
			case op < 8:
				found, err := e.tree.DeleteItem(e.tx, key(i))
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := model[key(i)]; ok != found {
					t.Fatalf("delete %d: found %v, model %v", i, found, ok)
				}
				delete(model, key(i))
			default:
				if _, ok := model[key(i)]; !ok {
					continue
				}
				err := e.tree.UpdateItem(e.tx, key(i), func(d []byte) error {
					d[0] ^= 1
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				b := []byte(model[key(i)])
				b[0] ^= 1
				model[key(i)] = string(b)
			}
			if rng.IntN(20) == 0 {
				// A publication; some views go away, the newest stays.
				v := e.tx.Publish()
				views = slices.DeleteFunc(views, func(view) bool { return rng.IntN(3) == 0 })
				views = append(views, view{v: v, root: e.tree.Root(), items: cloneModel(model)})
				e.tx.Trim(live())
				check(fmt.Sprintf("round %d step %d", round, step))
			}
		}
		check(fmt.Sprintf("round %d end", round))
		// Only the newest view left: nothing kept but what it reads,
		// which is the blocks as they are unless changed since.
		views = views[len(views)-1:]
		e.tx.Publish()
		e.tx.Trim(live())
		check("trimmed")
		views = nil
		last := e.tx.Publish()
		e.tx.Trim([]uint64{last})
		if n, _ := e.tx.KeptVersions(); n != 0 {
			t.Fatalf("round %d: %d versions kept with no view", round, n)
		}
		if len(e.tx.gone) != 0 {
			t.Fatalf("round %d: %d freed addresses kept with no view", round, len(e.tx.gone))
		}
		// A view across the commit: WriteDirty leaves its bytes alone.
		v := e.tx.Publish()
		views = []view{{v: v, root: e.tree.Root(), items: cloneModel(model)}}
		if err := e.tree.InsertItem(e.tx, key(1000+round), []byte("after")); err != nil {
			t.Fatal(err)
		}
		model[key(1000+round)] = "after"
		check("before commit")
		old := e.tx
		e.commit()
		oldE := *e
		oldE.tx = old
		for _, w := range views {
			got := readAll(t, viewReader{&oldE, w.v}, w.root)
			if len(got) != len(w.items) {
				t.Fatalf("after commit: view reads %d items, had %d", len(got), len(w.items))
			}
		}
		views = nil
		if got := readAll(t, e.store, e.tree.Root()); len(got) != len(model) {
			t.Fatalf("committed tree has %d items, model %d", len(got), len(model))
		}
	}
	e.verify()
}

func cloneModel(m map[disk.Key]string) map[disk.Key]string {
	c := make(map[disk.Key]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// TestViewsUnpublishedCostNothing: without publications, or once Trim
// was told no view is live, no block is copied for views; the next
// publication protects its state again.
func TestViewsUnpublishedCostNothing(t *testing.T) {
	e := newEnv(t, 4096, Options{})
	ins := func(from, to int) {
		for i := from; i < to; i++ {
			if err := e.tree.InsertItem(e.tx, disk.Key{ObjectID: disk.ObjectID(256 + i)}, []byte("data")); err != nil {
				t.Fatal(err)
			}
		}
	}
	ins(0, 300)
	if n, c := e.tx.KeptVersions(); n != 0 || c != 0 || len(e.tx.pins) != 0 {
		t.Fatalf("%d versions kept without a publication", n)
	}
	e.tx.Publish()
	e.tx.Trim(nil) // the view went away unread
	ins(300, 600)
	if n, c := e.tx.KeptVersions(); n != 0 || c != 0 || len(e.tx.pins) != 0 || len(e.tx.gone) != 0 {
		t.Fatalf("%d versions kept with no live view", n)
	}
	v := e.tx.Publish()
	root := e.tree.Root()
	ins(600, 900)
	if n, _ := e.tx.KeptVersions(); n == 0 {
		t.Fatal("nothing kept for a live view")
	}
	if got := readAll(t, viewReader{e, v}, root); len(got) != 600 {
		t.Fatalf("view reads %d items, want 600", len(got))
	}
}
