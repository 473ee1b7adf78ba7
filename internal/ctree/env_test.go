package ctree

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

var seedFlag = flag.Uint64("ctree.seed", 0, "seed for randomized ctree tests (0: from GOBTRFS_CTREE_SEED or the clock)")

// testSeed returns the seed for a randomized test and logs it, so a failing
// run can be replayed with -ctree.seed or GOBTRFS_CTREE_SEED.
func testSeed(tb testing.TB) uint64 {
	tb.Helper()
	seed := *seedFlag
	if seed == 0 {
		if s := os.Getenv("GOBTRFS_CTREE_SEED"); s != "" {
			v, err := strconv.ParseUint(s, 0, 64)
			if err != nil {
				tb.Fatalf("GOBTRFS_CTREE_SEED: %v", err)
			}
			seed = v
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("seed %d (replay with -ctree.seed=%d or GOBTRFS_CTREE_SEED=%d)", seed, seed, seed)
	return seed
}

// longRun reports whether the long randomized runs were asked for.
func longRun() bool { return os.Getenv("GOBTRFS_LONG") != "" }

var testFSID = disk.UUID{0xf5, 0x1d, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
var testChunkUUID = disk.UUID{0xc4, 0x7e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15}

// env is one tree in a MemStore with a running transaction.
type env struct {
	tb    testing.TB
	store *MemStore
	stats *Stats
	gen   disk.Generation
	tx    *Trans
	tree  *Tree
}

func newEnv(tb testing.TB, nodesize int, opts Options) *env {
	tb.Helper()
	e := &env{tb: tb, stats: new(Stats), gen: 10}
	e.store = NewMemStore(Params{NodeSize: nodesize, FSID: testFSID, ChunkTreeUUID: testChunkUUID})
	e.tx = NewTrans(e.store, e.gen, e.stats)
	t, err := Create(e.tx, disk.FSTreeObjectID, opts)
	if err != nil {
		tb.Fatal(err)
	}
	e.tree = t
	return e
}

// commit writes the dirty blocks, commits the store and starts the next
// transaction. It then reads the committed tree back with the read-only
// Cursor (an independent reader that checks every block) when check is set.
func (e *env) commit() {
	e.tb.Helper()
	if _, err := e.tx.WriteDirty(); err != nil {
		e.tb.Fatal(err)
	}
	e.store.Commit(e.gen)
	e.gen++
	e.tx = NewTrans(e.store, e.gen, e.stats)
}

// verify runs Verify and checks that no block leaked: every dirty block
// is reachable and every live store block is reachable or pinned.
func (e *env) verify() {
	e.tb.Helper()
	if err := e.tree.Verify(e.tx); err != nil {
		e.tb.Fatalf("verify: %v\n%s", err, e.dump())
	}
	reach := e.reachable()
	e.tx.mu.Lock()
	for a := range e.tx.dirty {
		if !reach[a] {
			e.tx.mu.Unlock()
			e.tb.Fatalf("dirty block %d not reachable", a)
		}
	}
	e.tx.mu.Unlock()
	e.store.mu.Lock()
	pinned := map[disk.LogicalAddr]bool{}
	for _, a := range e.store.pinned {
		pinned[a] = true
	}
	for a := range e.store.live {
		if !reach[a] && !pinned[a] {
			e.store.mu.Unlock()
			e.tb.Fatalf("live block %d neither reachable nor pinned", a)
		}
	}
	e.store.mu.Unlock()
}

// reachable returns the addresses of every block of the tree.
func (e *env) reachable() map[disk.LogicalAddr]bool {
	m := map[disk.LogicalAddr]bool{}
	var walk func(b *block)
	walk = func(b *block) {
		m[b.addr] = true
		if b.level() == 0 {
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
	return m
}

type kv struct {
	k disk.Key
	v []byte
}

// items returns every item of the tree in order, read with Range.
func (e *env) items() []kv {
	e.tb.Helper()
	var out []kv
	err := e.tree.Range(e.tx, disk.Key{}, disk.MaxKey, func(k disk.Key, d []byte) (bool, error) {
		out = append(out, kv{k, append([]byte(nil), d...)})
		return true, nil
	})
	if err != nil {
		e.tb.Fatal(err)
	}
	return out
}

// check compares the tree, read with Range, with the model without
// copying payloads.
func (e *env) check(what string, m model) {
	e.tb.Helper()
	want := m.sorted()
	i := 0
	err := e.tree.Range(e.tx, disk.Key{}, disk.MaxKey, func(k disk.Key, d []byte) (bool, error) {
		if i >= len(want) {
			return false, fmt.Errorf("extra item %v", k)
		}
		if k != want[i].k || !bytes.Equal(d, want[i].v) {
			return false, fmt.Errorf("item %d is %v (%d bytes), model has %v (%d bytes)", i, k, len(d), want[i].k, len(want[i].v))
		}
		i++
		return true, nil
	})
	if err == nil && i != len(want) {
		err = fmt.Errorf("%d items, model has %d", i, len(want))
	}
	if err != nil {
		e.tb.Fatalf("%s: %v", what, err)
	}
}

// committedItems reads the last committed tree with the read-only Cursor.
func (e *env) committedItems(root Root) []kv {
	e.tb.Helper()
	var out []kv
	c := NewCursor(e.store, root)
	ok, err := c.First()
	for ; ok && err == nil; ok, err = c.Next() {
		out = append(out, kv{c.Key(), append([]byte(nil), c.Data()...)})
	}
	if err != nil {
		e.tb.Fatal(err)
	}
	return out
}

// model is the reference: a map of keys to payloads.
type model map[disk.Key][]byte

func (m model) sorted() []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return a.k.Compare(b.k) })
	return out
}

// compare fails if got differs from the model.
func (m model) compare(tb testing.TB, what string, got []kv) {
	tb.Helper()
	want := m.sorted()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d items, model has %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i].k != want[i].k || !bytes.Equal(got[i].v, want[i].v) {
			tb.Fatalf("%s: item %d is %v (%d bytes), model has %v (%d bytes)", what, i,
				got[i].k, len(got[i].v), want[i].k, len(want[i].v))
		}
	}
}

// dump prints the tree's shape for failure messages (leaves abbreviated).
func (e *env) dump() string {
	var buf bytes.Buffer
	var walk func(b *block, depth int)
	walk = func(b *block, depth int) {
		if depth > 6 {
			return
		}
		n := b.nritems()
		fmt.Fprintf(&buf, "%*sblock %d level %d gen %d items %d", depth*2, "", b.addr, b.level(), b.generation(), n)
		if n > 0 {
			fmt.Fprintf(&buf, " first %v last %v", b.key(0), b.key(n-1))
		}
		if b.level() == 0 {
			fmt.Fprintf(&buf, " free %d\n", b.freeSpace())
			return
		}
		buf.WriteByte('\n')
		for i := 0; i < n; i++ {
			c, err := e.tree.readChild(e.tx, b, i)
			if err != nil {
				fmt.Fprintf(&buf, "%*schild %d: %v\n", depth*2+2, "", i, err)
				continue
			}
			walk(c, depth+1)
		}
	}
	walk(e.tree.root.Load(), 0)
	if buf.Len() > 20000 {
		return buf.String()[:20000] + "..."
	}
	return buf.String()
}

// payload returns n deterministic bytes for key k and version v.
func payload(k disk.Key, v, n int) []byte {
	b := make([]byte, n)
	x := uint64(k.ObjectID)*0x9e3779b97f4a7c15 ^ k.Offset ^ uint64(k.Type)<<56 ^ uint64(v)*0x632be59bd9b4e019
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// randKey draws a key from a space of about nobj*ntypes*noff keys.
func randKey(r *rand.Rand, nobj, noff int) disk.Key {
	types := []disk.KeyType{disk.InodeItemKey, disk.InodeRefKey, disk.DirItemKey, disk.DirIndexKey, disk.ExtentDataKey}
	return disk.Key{ObjectID: disk.ObjectID(256 + r.IntN(nobj)), Type: types[r.IntN(len(types))], Offset: uint64(r.IntN(noff))}
}
