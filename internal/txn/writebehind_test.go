package txn

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// errFakeWrite is what the fake device returns from the call it is told
// to fail; tests find it again through errors.Is.
var errFakeWrite = errors.New("fake device: injected write failure")

// wbCall is one write the fake device received: where, a copy of the
// bytes, and its place in the order of arrival.
type wbCall struct {
	addr disk.LogicalAddr
	data []byte
	seq  int
}

// wbFake is the write function under a writeBehind. It records every
// call, notices two calls running at once and calls arriving while the
// test says nothing may write, can fail its Nth call and can be slowed
// to keep a buffer in flight while the test goes on staging.
type wbFake struct {
	failAt int                          // 1-based call to fail; 0 for none
	delay  func(call int) time.Duration // nil for no delay

	mu       sync.Mutex
	calls    []wbCall
	finished int // calls that have returned

	active   atomic.Int32
	overlap  atomic.Bool // two calls ran at once
	idle     atomic.Bool // set by the test: no call may start now
	late     atomic.Bool // a call started while idle
	mutated  atomic.Bool // a buffer changed while being written
	started  atomic.Int32
	attempts atomic.Int32
}

// write is the writeBehind.write of the fake.
func (f *wbFake) write(p []byte, addr disk.LogicalAddr) error {
	if f.active.Add(1) > 1 {
		f.overlap.Store(true)
	}
	defer f.active.Add(-1)
	if f.idle.Load() {
		f.late.Store(true)
	}
	n := int(f.attempts.Add(1))
	cp := bytes.Clone(p)
	if f.delay != nil {
		time.Sleep(f.delay(n))
	}
	if !bytes.Equal(cp, p) {
		f.mutated.Store(true)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.finished++ }()
	if n == f.failAt {
		return fmt.Errorf("write %d bytes at %d: %w", len(p), addr, errFakeWrite)
	}
	f.calls = append(f.calls, wbCall{addr: addr, data: cp, seq: n})
	return nil
}

// snapshot returns the successful calls so far and how many calls have
// returned.
func (f *wbFake) snapshot() ([]wbCall, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wbCall(nil), f.calls...), f.finished
}

// checkClean fails the test for any concurrency rule the fake saw broken.
func (f *wbFake) checkClean(t *testing.T) {
	t.Helper()
	if f.overlap.Load() {
		t.Error("two write calls ran at the same time")
	}
	if f.late.Load() {
		t.Error("a write call started after flush returned, without a new stage call")
	}
	if f.mutated.Load() {
		t.Error("a buffer changed while its write call was running")
	}
}

// wbSpan is a write the merge policy predicts: address and length.
type wbSpan struct {
	addr disk.LogicalAddr
	n    int
}

// wbPolicy predicts the write calls of a writeBehind from its stage and
// flush calls: small writes that continue the staged bytes merge while
// the total stays within stageSize; anything else starts a new buffer;
// a large write first writes what is staged, then itself.
type wbPolicy struct {
	staged bool
	cur    wbSpan
	calls  []wbSpan
}

func (m *wbPolicy) stage(addr disk.LogicalAddr, n int) {
	if n >= stageLarge {
		m.flush()
		m.calls = append(m.calls, wbSpan{addr, n})
		return
	}
	if m.staged && (addr != m.cur.addr+disk.LogicalAddr(m.cur.n) || m.cur.n+n > stageSize) {
		m.flush()
	}
	if !m.staged {
		m.staged, m.cur = true, wbSpan{addr, 0}
	}
	m.cur.n += n
}

func (m *wbPolicy) flush() {
	if m.staged {
		m.calls = append(m.calls, m.cur)
		m.staged = false
	}
}

// wbSeed returns the seed of a randomized test, from GOBTRFS_SEED when
// set, and logs how to replay it.
func wbSeed(t *testing.T) int64 {
	s := time.Now().UnixNano()
	if v := os.Getenv("GOBTRFS_SEED"); v != "" {
		if _, err := fmt.Sscan(v, &s); err != nil {
			t.Fatalf("GOBTRFS_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay with GOBTRFS_SEED=%d)", s, s)
	return s
}

const (
	wbBase    = disk.LogicalAddr(1 << 30) // the fake device's first address
	wbDevSize = 24 << 20
)

// wbRun is one randomized sequence: the writeBehind, its fake, the
// device the stage calls describe (want) and the one the recorded calls
// build (got), and the predicted calls.
type wbRun struct {
	t       *testing.T
	rng     *rand.Rand
	fake    *wbFake
	wb      *writeBehind
	want    []byte
	got     []byte
	policy  wbPolicy
	applied int // recorded calls already applied to got
	next    disk.LogicalAddr
	history []wbSpan // stage calls, for rewrites
}

// stage stages n random bytes at addr on the writeBehind and on want.
func (r *wbRun) stage(addr disk.LogicalAddr, n int) {
	p := r.fill(n)
	r.fake.idle.Store(false)
	if err := r.wb.stage(p, addr); err != nil {
		r.t.Fatalf("stage %d bytes at %d: %v", n, addr, err)
	}
	copy(r.want[addr-wbBase:], p)
	// The caller may reuse its buffer at once: what it writes there next
	// must not reach the device.
	clear(p)
	r.policy.stage(addr, n)
	r.history = append(r.history, wbSpan{addr, n})
	r.next = addr + disk.LogicalAddr(n)
}

// fill returns n new random-looking bytes: a random block of a prime
// length repeated (byte by byte randomness is slow under -race, and a
// prime period makes shifted copies differ).
func (r *wbRun) fill(n int) []byte {
	const period = 4093
	p := make([]byte, n)
	r.rng.Read(p[:min(n, period)])
	for done := period; done < n; done *= 2 {
		copy(p[done:], p[:done])
	}
	return p
}

// randAddr returns an address where n bytes fit on the device.
func (r *wbRun) randAddr(n int) disk.LogicalAddr {
	return wbBase + disk.LogicalAddr(r.rng.Intn(wbDevSize-n+1))
}

// step does one random operation.
func (r *wbRun) step() {
	small := func() int {
		if r.rng.Intn(3) > 0 {
			return 4096 * (1 + r.rng.Intn(16))
		}
		return 1 + r.rng.Intn(stageLarge-1)
	}
	fits := func(a disk.LogicalAddr, n int) bool { return int(a-wbBase)+n <= wbDevSize }
	switch k := r.rng.Intn(20); {
	case k < 9: // contiguous small write
		n := small()
		if a := r.next; fits(a, n) {
			r.stage(a, n)
		} else {
			r.stage(r.randAddr(n), n)
		}
	case k < 11: // non-contiguous small write
		n := small()
		r.stage(r.randAddr(n), n)
	case k < 13: // contiguous near stageLarge: crosses stageSize soon
		n := stageLarge - 1 - r.rng.Intn(8192)
		if a := r.next; fits(a, n) {
			r.stage(a, n)
		} else {
			r.stage(r.randAddr(n), n)
		}
	case k < 15: // large write, contiguous or anywhere
		n := stageLarge + r.rng.Intn(stageLarge)
		a := r.next
		if r.rng.Intn(2) == 0 || !fits(a, n) {
			a = r.randAddr(n)
		}
		r.stage(a, n)
	case k < 18: // rewrite (part of) an earlier range with new bytes
		if len(r.history) == 0 {
			return
		}
		h := r.history[r.rng.Intn(len(r.history))]
		off := r.rng.Intn(h.n)
		n := 1 + r.rng.Intn(h.n-off)
		r.stage(h.addr+disk.LogicalAddr(off), n)
	default:
		r.flush()
	}
}

// flush flushes and checks that the device matches the stage calls and
// the calls match the merge policy.
func (r *wbRun) flush() {
	t := r.t
	t.Helper()
	if err := r.wb.flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if a := r.fake.active.Load(); a != 0 {
		t.Fatalf("flush returned with %d write calls running", a)
	}
	r.fake.idle.Store(true)
	r.policy.flush()
	calls, _ := r.fake.snapshot()
	for _, c := range calls[r.applied:] {
		if c.addr < wbBase || int(c.addr-wbBase)+len(c.data) > wbDevSize {
			t.Fatalf("write of %d bytes at %d outside every staged range", len(c.data), c.addr)
		}
		copy(r.got[c.addr-wbBase:], c.data)
	}
	r.applied = len(calls)
	if i := firstDiff(r.want, r.got); i >= 0 {
		t.Fatalf("after flush the device differs from the stage calls at %d", wbBase+disk.LogicalAddr(i))
	}
	if len(calls) != len(r.policy.calls) {
		t.Fatalf("%d write calls, merging predicts %d", len(calls), len(r.policy.calls))
	}
	for i, c := range calls {
		if w := r.policy.calls[i]; c.addr != w.addr || len(c.data) != w.n {
			t.Fatalf("write call %d: %d bytes at %d, merging predicts %d bytes at %d", i, len(c.data), c.addr, w.n, w.addr)
		}
	}
	r.fake.checkClean(t)
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// TestWriteBehindRandom stages random mixes of small, contiguous,
// scattered, large and repeated writes with flushes in between, on a
// fake device that sometimes is slow so buffers stay in flight, and
// checks after every flush that the device holds what the stage calls
// wrote, in the calls the merge policy predicts.
func TestWriteBehindRandom(t *testing.T) {
	s := wbSeed(t)
	runs, steps := 6, 100
	if os.Getenv("GOBTRFS_LONG") == "1" {
		runs, steps = 60, 400
	}
	want, got := make([]byte, wbDevSize), make([]byte, wbDevSize)
	for run := range runs {
		rng := rand.New(rand.NewSource(s + int64(run)))
		clear(want)
		clear(got)
		slow := rng.Intn(2) == 0
		fake := &wbFake{delay: func(n int) time.Duration {
			if slow && n%2 == 0 {
				return time.Duration(200+n%5*100) * time.Microsecond
			}
			return 0
		}}
		r := &wbRun{t: t, rng: rng, fake: fake, wb: &writeBehind{write: fake.write},
			want: want, got: got, next: r0(rng)}
		for range steps {
			r.step()
		}
		r.flush()
		time.Sleep(time.Millisecond)
		r.fake.checkClean(t)
		if t.Failed() {
			t.Fatalf("run %d failed (seed %d)", run, s)
		}
	}
}

// r0 returns a random first address for the contiguous writes.
func r0(rng *rand.Rand) disk.LogicalAddr {
	return wbBase + disk.LogicalAddr(rng.Intn(wbDevSize/2))
}

// TestWriteBehindMerge checks that N contiguous 4 KiB writes become
// ceil(N*4K/stageSize) write calls of whole staging buffers.
func TestWriteBehindMerge(t *testing.T) {
	for _, n := range []int{1, 2, 1023, 1024, 1025, 2048, 3000} {
		fake := &wbFake{}
		wb := &writeBehind{write: fake.write}
		p := make([]byte, 4096)
		for i := range n {
			p[0], p[1] = byte(i), byte(i>>8)
			if err := wb.stage(p, wbBase+disk.LogicalAddr(i*4096)); err != nil {
				t.Fatal(err)
			}
		}
		if err := wb.flush(); err != nil {
			t.Fatal(err)
		}
		calls, _ := fake.snapshot()
		if want := (n*4096 + stageSize - 1) / stageSize; len(calls) != want {
			t.Fatalf("%d contiguous 4 KiB writes: %d write calls, want %d", n, len(calls), want)
		}
		at := wbBase
		for i, c := range calls {
			if c.addr != at || (i < len(calls)-1 && len(c.data) != stageSize) {
				t.Fatalf("%d writes: call %d is %d bytes at %d, want a full buffer at %d", n, i, len(c.data), c.addr, at)
			}
			for j := 0; j < len(c.data); j += 4096 {
				k := int(c.addr-wbBase)/4096 + j/4096
				if c.data[j] != byte(k) || c.data[j+1] != byte(k>>8) {
					t.Fatalf("%d writes: block %d holds the bytes of another write", n, k)
				}
			}
			at += disk.LogicalAddr(len(c.data))
		}
		if at != wbBase+disk.LogicalAddr(n*4096) {
			t.Fatalf("%d writes: calls cover up to %d, want %d", n, at, wbBase+disk.LogicalAddr(n*4096))
		}
		fake.checkClean(t)
	}
}

// stage4k stages n contiguous 4 KiB writes from *at on, stopping at the
// first error, which it returns with the number of writes done.
func stage4k(wb *writeBehind, at *disk.LogicalAddr, n int) (int, error) {
	p := make([]byte, 4096)
	for i := range n {
		p[0] = byte(i)
		if err := wb.stage(p, *at); err != nil {
			return i, err
		}
		*at += 4096
	}
	return n, nil
}

// expectStuck checks that every kind of later call keeps failing with
// the injected error and that nothing more reaches the device.
func expectStuck(t *testing.T, wb *writeBehind, fake *wbFake, at disk.LogicalAddr) {
	t.Helper()
	before := fake.attempts.Load()
	for i, try := range []func() error{
		func() error { return wb.stage(make([]byte, 4096), at) },
		func() error { return wb.stage(make([]byte, 4096), at+4096) },
		func() error { return wb.stage(make([]byte, 8192), at+stageSize) },
		func() error { return wb.flush() },
		func() error { return wb.stage(make([]byte, stageLarge), at+2*stageSize) },
		func() error { return wb.flush() },
	} {
		if err := try(); !errors.Is(err, errFakeWrite) {
			t.Errorf("call %d after the failure: got %v, want the injected error", i, err)
		}
	}
	if a := fake.attempts.Load(); a != before {
		t.Errorf("%d write calls after the failure was reported", a-before)
	}
	fake.checkClean(t)
}
