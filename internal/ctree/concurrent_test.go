package ctree

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestConcurrent runs 64 goroutines that insert, delete, update and look
// up items in one tree at once, in one transaction per round, with readers
// scanning ranges meanwhile. Each writer owns the keys whose offset is its
// number modulo 64, interleaved with everyone else's so that they contend
// for the same leaves; since only it changes them, its lookups must see
// exactly its own model. After each round the tree is verified, compared
// with the union of the models, and committed.
func TestConcurrent(t *testing.T) {
	seed := testSeed(t)
	const writers = 64
	rounds, opsPerRound := 4, 300
	if testing.Short() {
		rounds, opsPerRound = 2, 100
	}
	if longRun() {
		rounds, opsPerRound = 10, 2000
	}
	for _, ns := range []int{4096, 16384} {
		t.Run(fmt.Sprintf("ns%dk", ns/1024), func(t *testing.T) {
			e := newEnv(t, ns, Options{})
			models := make([]model, writers)
			for i := range models {
				models[i] = model{}
			}
			maxSize := disk.MaxItemDataSize(ns)
			for round := 0; round < rounds; round++ {
				var wg sync.WaitGroup
				errs := make(chan error, writers+4)
				stop := make(chan struct{})
				for g := 0; g < writers; g++ {
					wg.Add(1)
					go func(g int) {
						defer wg.Done()
						r := rand.New(rand.NewPCG(seed, uint64(round*writers+g)))
						if err := concurrentWriter(e, r, g, writers, models[g], opsPerRound, maxSize); err != nil {
							errs <- fmt.Errorf("writer %d: %w", g, err)
						}
					}(g)
				}
				var rg sync.WaitGroup
				for i := 0; i < 2; i++ {
					rg.Add(1)
					go func() {
						defer rg.Done()
						if err := concurrentReader(e, stop); err != nil {
							errs <- err
						}
					}()
				}
				done := make(chan struct{})
				go func() { wg.Wait(); close(stop); rg.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(5 * time.Minute):
					panic("concurrent test: deadlock (goroutine stacks follow)")
				}
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				e.verify()
				union := model{}
				for _, m := range models {
					for k, v := range m {
						union[k] = v
					}
				}
				e.check(fmt.Sprintf("round %d", round), union)
				e.commit()
			}
			s := e.stats.Snapshot()
			t.Logf("%+v", s)
			if s.SearchRestarts == 0 || s.LeafSplits == 0 || s.BlocksCowed == 0 {
				t.Errorf("the test did not exercise restarts, splits and COW: %+v", s)
			}
		})
	}
}

// concurrentWriter runs ops random operations on the keys writer g owns.
func concurrentWriter(e *env, r *rand.Rand, g, writers int, m model, ops, maxSize int) error {
	key := func() disk.Key {
		return disk.Key{ObjectID: 256 + disk.ObjectID(r.IntN(3)), Type: disk.ExtentDataKey,
			Offset: uint64(r.IntN(400)*writers + g)}
	}
	size := func() int {
		if r.IntN(50) == 0 {
			return r.IntN(maxSize/2 + 1)
		}
		return r.IntN(120)
	}
	for i := 0; i < ops; i++ {
		k := key()
		old, exists := m[k]
		switch op := r.IntN(12); {
		case op >= 10 && exists:
			// Grow or shrink one of our items.
			if op == 10 && len(old) < 300 {
				add := 1 + r.IntN(100)
				tail := payload(k, i, add)
				if err := e.tree.ExtendItem(e.tx, k, add, func(d []byte) { copy(d[len(old):], tail) }); err != nil {
					return fmt.Errorf("extend %v: %w", k, err)
				}
				m[k] = append(append([]byte(nil), old...), tail...)
			} else if len(old) > 0 {
				n := r.IntN(len(old))
				if _, err := e.tree.TruncateItem(e.tx, k, n, true); err != nil {
					return fmt.Errorf("truncate %v: %w", k, err)
				}
				m[k] = old[:n:n]
			}
		case op < 5:
			d := payload(k, i+g*1000, size())
			err := e.tree.InsertItem(e.tx, k, d)
			if exists {
				if err == nil {
					return fmt.Errorf("insert of existing %v succeeded", k)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("insert %v: %w", k, err)
			}
			m[k] = d
		case op < 8:
			found, err := e.tree.DeleteItem(e.tx, k)
			if err != nil || found != exists {
				return fmt.Errorf("delete %v: found %v (model %v), %v", k, found, exists, err)
			}
			delete(m, k)
		case op < 9:
			var nd []byte
			err := e.tree.UpdateItem(e.tx, k, func(d []byte) error {
				nd = payload(k, i+7, len(d))
				copy(d, nd)
				return nil
			})
			if (err == nil) != exists {
				return fmt.Errorf("update %v: %v (model %v)", k, err, exists)
			}
			if exists {
				m[k] = nd
			}
		case op == 9:
			d, found, err := e.tree.Lookup(e.tx, k)
			if err != nil || found != exists || !bytes.Equal(d, old) {
				return fmt.Errorf("lookup %v: found %v (model %v) %d bytes (model %d), %v", k, found, exists, len(d), len(old), err)
			}
		}
	}
	return nil
}

// concurrentReader scans windows of the tree until stop, checking key
// order. It pauses between scans so the writers make progress.
func concurrentReader(e *env, stop <-chan struct{}) error {
	r := rand.New(rand.NewPCG(1, 2))
	for {
		select {
		case <-stop:
			return nil
		case <-time.After(200 * time.Microsecond):
		}
		start := disk.Key{ObjectID: 256 + disk.ObjectID(r.IntN(3)), Type: disk.ExtentDataKey, Offset: uint64(r.IntN(400 * 64))}
		end := start
		end.Offset += 2000
		var prev *disk.Key
		err := e.tree.Range(e.tx, start, end, func(k disk.Key, _ []byte) (bool, error) {
			if prev != nil && !prev.Less(k) {
				return false, fmt.Errorf("reader: key %v after %v", k, *prev)
			}
			prev = &k
			return true, nil
		})
		if err != nil {
			return err
		}
	}
}
