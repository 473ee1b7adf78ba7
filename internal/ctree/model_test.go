package ctree

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// keySet is the model's keys with O(1) random choice.
type keySet struct {
	keys []disk.Key
	idx  map[disk.Key]int
}

func (s *keySet) add(k disk.Key) {
	if _, ok := s.idx[k]; ok {
		return
	}
	s.idx[k] = len(s.keys)
	s.keys = append(s.keys, k)
}

func (s *keySet) remove(k disk.Key) {
	i, ok := s.idx[k]
	if !ok {
		return
	}
	last := s.keys[len(s.keys)-1]
	s.keys[i] = last
	s.idx[last] = i
	s.keys = s.keys[:len(s.keys)-1]
	delete(s.idx, k)
}

// modelCfg is one randomized run.
type modelCfg struct {
	nodesize    int
	ops         int
	verifyEvery int    // Verify and compare with the model every this many ops
	nobj, noff  int    // key space
	sizes       string // "small", "mixed", "large"
	noShortcut  bool
}

func (c modelCfg) String() string {
	s := fmt.Sprintf("ns%dk/%s/ops%d/v%d", c.nodesize/1024, c.sizes, c.ops, c.verifyEvery)
	if c.noShortcut {
		s += "/noshortcut"
	}
	return s
}

// modelRun drives one tree and the model with the same random operations.
type modelRun struct {
	cfg  modelCfg
	r    *rand.Rand
	e    *env
	m    model
	ks   *keySet
	max  int
	vers int
	ops  map[string]int
}

func (mr *modelRun) size() int {
	switch mr.cfg.sizes {
	case "small":
		return mr.r.IntN(129)
	case "large":
		if mr.r.IntN(2) == 0 {
			return mr.max - mr.r.IntN(64)
		}
		return mr.r.IntN(mr.max + 1)
	}
	switch p := mr.r.IntN(100); {
	case p < 60:
		return mr.r.IntN(65)
	case p < 85:
		return 64 + mr.r.IntN(449)
	case p < 95:
		return 512 + mr.r.IntN(max(1, mr.max/4-512))
	default:
		return mr.max/4 + mr.r.IntN(mr.max-mr.max/4+1)
	}
}

// pick returns an existing key most of the time, else a random one.
func (mr *modelRun) pick() disk.Key {
	if len(mr.ks.keys) > 0 && mr.r.IntN(10) < 8 {
		return mr.ks.keys[mr.r.IntN(len(mr.ks.keys))]
	}
	return randKey(mr.r, mr.cfg.nobj, mr.cfg.noff)
}

func (mr *modelRun) fatalf(format string, args ...any) {
	mr.e.tb.Helper()
	mr.e.tb.Fatalf("%s: %s", mr.cfg, fmt.Sprintf(format, args...))
}

func (mr *modelRun) step() {
	e, m, r := mr.e, mr.m, mr.r
	op := r.IntN(100)
	switch {
	case op < 40:
		mr.ops["insert"]++
		k := randKey(r, mr.cfg.nobj, mr.cfg.noff)
		mr.vers++
		d := payload(k, mr.vers, mr.size())
		err := e.tree.InsertItem(e.tx, k, d)
		_, exists := m[k]
		if exists != errors.Is(err, ErrExist) || (err != nil && !exists) {
			mr.fatalf("insert %v: %v (model has it: %v)", k, err, exists)
		}
		if !exists {
			m[k] = d
			mr.ks.add(k)
		}
	case op < 65:
		mr.ops["delete"]++
		k := mr.pick()
		found, err := e.tree.DeleteItem(e.tx, k)
		_, exists := m[k]
		if err != nil || found != exists {
			mr.fatalf("delete %v: found %v err %v (model has it: %v)", k, found, err, exists)
		}
		delete(m, k)
		mr.ks.remove(k)
	case op < 73:
		mr.ops["update"]++
		k := mr.pick()
		mr.vers++
		v := mr.vers
		var nd []byte
		err := e.tree.UpdateItem(e.tx, k, func(d []byte) error {
			nd = payload(k, v, len(d))
			copy(d, nd)
			return nil
		})
		if _, exists := m[k]; exists != (err == nil) {
			mr.fatalf("update %v: %v (model has it: %v)", k, err, exists)
		}
		if err == nil {
			m[k] = nd
		}
	case op < 80:
		mr.ops["lookup"]++
		k := mr.pick()
		d, found, err := e.tree.Lookup(e.tx, k)
		want, exists := m[k]
		if err != nil || found != exists || !bytes.Equal(d, want) {
			mr.fatalf("lookup %v: found %v err %v (model has it: %v)", k, found, err, exists)
		}
	case op < 84:
		mr.ops["batch"]++
		mr.batch()
	case op < 86:
		mr.ops["delete_range"]++
		mr.deleteRange()
	case op < 94:
		mr.ops["resize"]++
		mr.resize()
	case op < 97:
		mr.ops["split_dup"]++
		mr.splitOrDup()
	default:
		mr.ops["commit"]++
		root := e.tree.Root()
		e.commit()
		if r.IntN(4) == 0 {
			m.compare(e.tb, mr.cfg.String()+": committed tree read with Cursor", e.committedItems(root))
		}
	}
}

// batch inserts 2..8 items with consecutive offsets, none of which exist.
func (mr *modelRun) batch() {
	e, m, r := mr.e, mr.m, mr.r
	base := randKey(r, mr.cfg.nobj, mr.cfg.noff)
	n := 2 + r.IntN(7)
	var items []Item
	total := 0
	for i := 0; i < n; i++ {
		k := base
		k.Offset += uint64(i)
		if _, ok := m[k]; ok {
			return
		}
		sz := mr.size() / n
		total += sz + ih
		mr.vers++
		items = append(items, Item{Key: k, Data: payload(k, mr.vers, sz)})
	}
	if total > e.tx.lds() {
		return
	}
	if err := e.tree.InsertItems(e.tx, items); err != nil {
		mr.fatalf("batch insert at %v: %v", base, err)
	}
	for _, it := range items {
		m[it.Key] = it.Data
		mr.ks.add(it.Key)
	}
}

// deleteRange deletes the keys of one object id in an offset window.
func (mr *modelRun) deleteRange() {
	e, m, r := mr.e, mr.m, mr.r
	start := randKey(r, mr.cfg.nobj, mr.cfg.noff)
	end := start
	if r.IntN(3) == 0 {
		end.ObjectID += disk.ObjectID(r.IntN(3))
	}
	end.Offset += uint64(r.IntN(mr.cfg.noff/4 + 1))
	n, err := e.tree.DeleteRange(e.tx, start, end)
	if err != nil {
		mr.fatalf("delete range %v..%v: %v", start, end, err)
	}
	want := 0
	for k := range m {
		if !k.Less(start) && !end.Less(k) {
			delete(m, k)
			mr.ks.remove(k)
			want++
		}
	}
	if n != want {
		mr.fatalf("delete range %v..%v deleted %d, model %d", start, end, n, want)
	}
}

// resize extends or truncates an existing item.
func (mr *modelRun) resize() {
	e, m, r := mr.e, mr.m, mr.r
	if len(mr.ks.keys) == 0 {
		return
	}
	k := mr.ks.keys[r.IntN(len(mr.ks.keys))]
	old := m[k]
	if r.IntN(2) == 0 {
		add := r.IntN(max(1, min(mr.max-len(old), 2*len(old)+64)) + 1)
		if len(old)+add > mr.max {
			add = mr.max - len(old)
		}
		mr.vers++
		tail := payload(k, mr.vers, add)
		err := e.tree.ExtendItem(e.tx, k, add, func(d []byte) { copy(d[len(old):], tail) })
		if err != nil {
			mr.fatalf("extend %v (%d) by %d: %v", k, len(old), add, err)
		}
		m[k] = append(append([]byte(nil), old...), tail...)
		return
	}
	if len(old) == 0 {
		return
	}
	newSize := r.IntN(len(old))
	fromEnd := r.IntN(2) == 0
	if !fromEnd {
		// The new key must stay below the next key.
		lo, hi := k, k
		hi.Offset += uint64(len(old) - newSize)
		if hi.Offset < lo.Offset {
			fromEnd = true
		}
		for _, o := range mr.ks.keys {
			if lo.Less(o) && !hi.Less(o) {
				fromEnd = true
				break
			}
		}
	}
	nk, err := e.tree.TruncateItem(e.tx, k, newSize, fromEnd)
	if err != nil {
		mr.fatalf("truncate %v (%d) to %d: %v", k, len(old), newSize, err)
	}
	if fromEnd {
		m[k] = old[:newSize:newSize]
		return
	}
	want := k
	want.Offset += uint64(len(old) - newSize)
	if nk != want {
		mr.fatalf("truncate %v from the front: new key %v, want %v", k, nk, want)
	}
	delete(m, k)
	mr.ks.remove(k)
	m[nk] = old[len(old)-newSize:]
	mr.ks.add(nk)
}

// splitOrDup splits an item in two, or duplicates it under a new key; the
// new key is the next offset, so nothing lies between.
func (mr *modelRun) splitOrDup() {
	e, m, r := mr.e, mr.m, mr.r
	if len(mr.ks.keys) == 0 {
		return
	}
	k := mr.ks.keys[r.IntN(len(mr.ks.keys))]
	nk, ok := keyAfter(k)
	if _, exists := m[nk]; exists || !ok {
		return
	}
	old := m[k]
	if r.IntN(2) == 0 {
		if len(old) > (mr.max-ih)/2 {
			return // a duplicate needs room for both copies in one leaf
		}
		if err := e.tree.DuplicateItem(e.tx, k, nk); err != nil {
			mr.fatalf("duplicate %v (%d bytes) as %v: %v", k, len(old), nk, err)
		}
		m[nk] = old
		mr.ks.add(nk)
		return
	}
	if len(old)+ih > mr.max {
		return // two items need one more header than fits
	}
	off := r.IntN(len(old) + 1)
	if err := e.tree.SplitItem(e.tx, k, nk, off); err != nil {
		mr.fatalf("split %v (%d bytes) at %d as %v: %v", k, len(old), off, nk, err)
	}
	m[k] = old[:off:off]
	m[nk] = old[off:]
	mr.ks.add(nk)
}

// runModel runs cfg with seed and returns the number of operations.
func runModel(t *testing.T, seed uint64, cfg modelCfg) map[string]int {
	t.Helper()
	mr := &modelRun{cfg: cfg, r: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		e: newEnv(t, cfg.nodesize, Options{NoPushRightShortcut: cfg.noShortcut}),
		m: model{}, ks: &keySet{idx: map[disk.Key]int{}}, max: disk.MaxItemDataSize(cfg.nodesize),
		ops: map[string]int{}}
	for i := 0; i < cfg.ops; i++ {
		mr.step()
		if (i+1)%cfg.verifyEvery == 0 {
			mr.e.verify()
			mr.e.check(cfg.String(), mr.m)
		}
	}
	mr.e.verify()
	mr.e.check(cfg.String(), mr.m)
	root := mr.e.tree.Root()
	mr.e.commit()
	mr.m.compare(t, cfg.String()+" committed", mr.e.committedItems(root))
	return mr.ops
}

// TestModel runs random operation sequences against the map model, across
// node sizes and item sizes. The default run does a few hundred thousand
// operations; GOBTRFS_LONG=1 runs millions; -short runs few.
func TestModel(t *testing.T) {
	seed := testSeed(t)
	scale := 1
	switch {
	case testing.Short():
		scale = 0
	case longRun():
		scale = 10
	}
	var cfgs []modelCfg
	for _, ns := range []int{4096, 16384, 65536} {
		// Verify after every operation: small trees, every edge.
		cfgs = append(cfgs,
			modelCfg{nodesize: ns, ops: 1500, verifyEvery: 1, nobj: 8, noff: 200, sizes: "mixed"},
			modelCfg{nodesize: ns, ops: 600, verifyEvery: 1, nobj: 4, noff: 50, sizes: "large"})
		if scale > 0 {
			cfgs = append(cfgs,
				modelCfg{nodesize: ns, ops: 30000 * scale, verifyEvery: 997, nobj: 64, noff: 4000, sizes: "small"},
				modelCfg{nodesize: ns, ops: 20000 * scale, verifyEvery: 997, nobj: 32, noff: 2000, sizes: "mixed"},
				modelCfg{nodesize: ns, ops: 4000 * scale, verifyEvery: 199, nobj: 8, noff: 300, sizes: "large"},
				modelCfg{nodesize: ns, ops: 10000 * scale, verifyEvery: 997, nobj: 32, noff: 2000, sizes: "small", noShortcut: true})
		}
	}
	totals := map[string]int{}
	all := 0
	for i, cfg := range cfgs {
		t.Run(cfg.String(), func(t *testing.T) {
			for op, n := range runModel(t, seed+uint64(i), cfg) {
				totals[op] += n
				all += n
			}
		})
	}
	t.Logf("operations run: %d in all %v", all, totals)
}
