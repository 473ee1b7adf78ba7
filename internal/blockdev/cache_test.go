package blockdev_test

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
)

// TestCacheModel runs random reads, writes and invalidations through a
// cache with a small budget and compares every read with a plain byte-slice
// model of the device.
func TestCacheModel(t *testing.T) {
	for _, opts := range []blockdev.CacheOptions{
		{PageSize: 4096, Budget: 5 * 4096, Bypass: -1},
		{PageSize: 8192, Budget: 64 << 10, Bypass: 12 << 10},
		{},
	} {
		rng := newRand(t)
		const size = 300<<10 + 1234 // the last page is partial
		mem := blockdev.NewMem(size)
		c, err := blockdev.NewCache(mem, opts)
		if err != nil {
			t.Fatal(err)
		}
		model := make([]byte, size)
		ops := 3000
		if testing.Short() {
			ops = 300
		}
		for op := range ops {
			n := 1 + rng.IntN(20<<10)
			off := rng.Int64N(size + 100)
			switch r := rng.IntN(10); {
			case r < 6:
				got := make([]byte, n)
				k, err := c.ReadAt(got, off)
				wantK := max(0, min(n, int(size-off)))
				if k != wantK || (k < n) != (err == io.EOF) || (k == n && err != nil) {
					t.Fatalf("op %d: read %d at %d: got %d %v", op, n, off, k, err)
				}
				if k > 0 && !bytes.Equal(got[:k], model[off:off+int64(k)]) {
					t.Fatalf("op %d: read %d at %d differs from model", op, n, off)
				}
			case r < 9:
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				_, err := c.WriteAt(p, off)
				if fits := off+int64(n) <= size; fits != (err == nil) {
					t.Fatalf("op %d: write %d at %d: %v", op, n, off, err)
				}
				if err == nil {
					copy(model[off:], p)
				}
			default:
				if rng.IntN(4) == 0 {
					c.Purge()
				} else {
					c.Invalidate(off, int64(n))
				}
			}
			if st := c.Stats(); st.Bytes > max(opts.Budget, 0) && opts.Budget != 0 {
				t.Fatalf("op %d: cache holds %d bytes over budget %d", op, st.Bytes, opts.Budget)
			}
		}
		st := c.Stats()
		t.Logf("%+v: %+v", opts, st)
		if st.Hits == 0 || st.Misses == 0 {
			t.Fatalf("cache never hit or never missed: %+v", st)
		}
		if opts.Bypass > 0 && st.Bypassed == 0 {
			t.Fatal("no read bypassed the cache")
		}
		if opts.Budget != 0 && opts.Budget < 64<<10 && st.Evictions == 0 {
			t.Fatal("small cache never evicted")
		}
	}
}

func TestCacheCounters(t *testing.T) {
	mem := blockdev.NewMem(1 << 20)
	f := blockdev.NewFaulty(mem)
	c, _ := blockdev.NewCache(f, blockdev.CacheOptions{PageSize: 4096, Budget: 2 * 4096})
	buf := make([]byte, 100)
	c.ReadAt(buf, 0)
	c.ReadAt(buf, 50)
	c.ReadAt(buf, 4096)
	c.ReadAt(buf, 8192) // evicts page 0
	c.ReadAt(buf, 0)
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 4 || st.Evictions != 2 || st.Pages != 2 || f.Count(blockdev.OpRead) != 4 {
		t.Fatalf("stats %+v, device reads %d", st, f.Count(blockdev.OpRead))
	}
	// A device error is returned and nothing is cached.
	f.FailAt(blockdev.OpRead, 5, false)
	if _, err := c.ReadAt(buf, 3*4096); !errors.Is(err, blockdev.ErrInjected) {
		t.Fatalf("read error: %v", err)
	}
	if _, err := c.ReadAt(buf, 3*4096); err != nil {
		t.Fatal(err)
	}
	// A failed write drops the pages it touched.
	f.FailAt(blockdev.OpWrite, 1, false)
	if _, err := c.WriteAt(buf, 3*4096); !errors.Is(err, blockdev.ErrInjected) {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Pages != 1 {
		t.Fatalf("pages after failed write: %d", st.Pages)
	}
	if _, err := blockdev.NewCache(mem, blockdev.CacheOptions{PageSize: 5000}); err == nil {
		t.Fatal("accepted a page size that is not a power of two")
	}
}

// TestCacheConcurrent has readers check stable and changing regions while
// writers rewrite whole 4 KiB blocks with one byte value, then checks that
// nothing stale stayed in the cache. Run it with -race.
func TestCacheConcurrent(t *testing.T) {
	rng := newRand(t)
	const size, block = 1 << 20, 4096
	mem := blockdev.NewMem(size)
	stable := make([]byte, size/2)
	for i := range stable {
		stable[i] = byte(rng.Uint32())
	}
	mem.WriteAt(stable, 0)
	c, _ := blockdev.NewCache(mem, blockdev.CacheOptions{PageSize: 16384, Budget: 256 << 10})
	seeds := make([]uint64, 6)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	iters := 500
	if testing.Short() {
		iters = 200
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(seeds))
	for g, s := range seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- cacheWorker(c, g < 2, s, iters, stable)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(readAll(t, c), readAll(t, mem)) {
		t.Fatal("cache holds bytes older than the device")
	}
}

// cacheWorker is one goroutine of TestCacheConcurrent.
func cacheWorker(c *blockdev.Cache, writer bool, seed uint64, iters int, stable []byte) error {
	rng := newRandSeed(seed)
	const size, block = 1 << 20, 4096
	half := int64(len(stable))
	buf := make([]byte, 24<<10)
	for range iters {
		if writer {
			b := half/block + rng.Int64N((size-half)/block)
			c.WriteAt(bytes.Repeat([]byte{byte(rng.Uint32())}, block), b*block)
			continue
		}
		n := 1 + rng.IntN(len(buf))
		off := rng.Int64N(size - int64(n))
		if _, err := c.ReadAt(buf[:n], off); err != nil {
			return err
		}
		for i := range n {
			pos := off + int64(i)
			if pos < half && buf[i] != stable[pos] {
				return errors.New("stable region read wrong")
			}
			if pos >= half && pos%block != 0 && i > 0 && buf[i] != buf[i-1] {
				return errors.New("torn 4 KiB block read from the cache")
			}
		}
	}
	return nil
}

// racyDev runs onRead after reading, while the cache has not yet published
// the page: the deterministic form of a write racing with a miss.
type racyDev struct {
	blockdev.Device
	onRead func()
}

func (d *racyDev) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.Device.ReadAt(p, off)
	if f := d.onRead; f != nil {
		d.onRead = nil
		f()
	}
	return n, err
}

func TestCacheWriteDuringMiss(t *testing.T) {
	dev := &racyDev{Device: blockdev.NewMem(1 << 20)}
	c, _ := blockdev.NewCache(dev, blockdev.CacheOptions{PageSize: 4096})
	dev.onRead = func() {
		if _, err := c.WriteAt([]byte{42}, 10); err != nil {
			t.Error(err)
		}
	}
	b := make([]byte, 1)
	c.ReadAt(b, 10) // may see 0 or 42: the write is concurrent with it
	if _, err := c.ReadAt(b, 10); err != nil || b[0] != 42 {
		t.Fatalf("read after the write returned %d, %v: stale page kept", b[0], err)
	}
}
