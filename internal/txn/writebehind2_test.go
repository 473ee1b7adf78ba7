package txn

import (
	"bytes"
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// TestWriteBehindErrorBehind fails the write of a buffer written behind
// the caller: the error must come back from a later stage or flush, and
// stay.
func TestWriteBehindErrorBehind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slow  bool
		flush bool // report through flush instead of more staging
	}{
		{"stage", false, false}, {"stage-slow", true, false},
		{"flush", false, true}, {"flush-slow", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &wbFake{failAt: 1}
			if tc.slow {
				fake.delay = func(int) time.Duration { return 5 * time.Millisecond }
			}
			wb := &writeBehind{write: fake.write}
			at := wbBase
			// One more than a buffer holds: the full buffer goes behind.
			if _, err := stage4k(wb, &at, stageSize/4096+1); err != nil {
				t.Fatalf("stage before the failure was known: %v", err)
			}
			var err error
			if tc.flush {
				err = wb.flush()
			} else {
				// The next buffer change lands the failed one at the latest.
				var n int
				n, err = stage4k(wb, &at, stageSize/4096+1)
				if err == nil {
					t.Fatalf("%d more writes staged without reporting the failure", n)
				}
			}
			if !errors.Is(err, errFakeWrite) {
				t.Fatalf("got %v, want the injected error", err)
			}
			expectStuck(t, wb, fake, at)
		})
	}
}

// TestWriteBehindErrorDrain fails the write of staged bytes made in the
// caller's goroutine: by flush, or by the drain before a large write
// (which then must not be written).
func TestWriteBehindErrorDrain(t *testing.T) {
	for _, large := range []bool{false, true} {
		fake := &wbFake{failAt: 1}
		wb := &writeBehind{write: fake.write}
		at := wbBase
		if _, err := stage4k(wb, &at, 3); err != nil {
			t.Fatal(err)
		}
		var err error
		if large {
			err = wb.stage(make([]byte, stageLarge), at)
		} else {
			err = wb.flush()
		}
		if !errors.Is(err, errFakeWrite) {
			t.Fatalf("large=%v: got %v, want the injected error", large, err)
		}
		if a := fake.attempts.Load(); a != 1 {
			t.Fatalf("large=%v: %d write calls, want only the failed one", large, a)
		}
		expectStuck(t, wb, fake, at)
	}
}

// TestWriteBehindErrorLarge fails a large write: its own stage call
// returns the error, and the staged bytes before it were written first.
func TestWriteBehindErrorLarge(t *testing.T) {
	fake := &wbFake{failAt: 2}
	wb := &writeBehind{write: fake.write}
	at := wbBase
	if _, err := stage4k(wb, &at, 3); err != nil {
		t.Fatal(err)
	}
	err := wb.stage(make([]byte, stageLarge+4096), at+stageSize)
	if !errors.Is(err, errFakeWrite) {
		t.Fatalf("large write: got %v, want the injected error", err)
	}
	calls, _ := fake.snapshot()
	if len(calls) != 1 || calls[0].addr != wbBase || len(calls[0].data) != 3*4096 {
		t.Fatalf("before the large write: %d calls, want the 12 KiB staged at %d", len(calls), wbBase)
	}
	// The failure sticks: the transaction cannot commit over it.
	if err := wb.stage(make([]byte, 4096), at+2*stageSize); !errors.Is(err, errFakeWrite) {
		t.Fatalf("stage after a failed large write: %v", err)
	}
	if err := wb.flush(); !errors.Is(err, errFakeWrite) {
		t.Fatalf("flush after a failed large write: %v", err)
	}
	fake.checkClean(t)
}

// TestWriteBehindDiscard drops staged bytes while a buffer is in
// flight: discard waits for that write, and nothing staged is written.
func TestWriteBehindDiscard(t *testing.T) {
	fake := &wbFake{delay: func(int) time.Duration { return 20 * time.Millisecond }}
	wb := &writeBehind{write: fake.write}
	at := wbBase
	if _, err := stage4k(wb, &at, stageSize/4096+10); err != nil {
		t.Fatal(err)
	}
	wb.discard()
	if a := fake.active.Load(); a != 0 {
		t.Fatalf("discard returned with %d writes running", a)
	}
	calls, finished := fake.snapshot()
	if finished != 1 || len(calls) != 1 || calls[0].addr != wbBase || len(calls[0].data) != stageSize {
		t.Fatalf("after discard: %d calls finished, %d recorded; want the one full buffer", finished, len(calls))
	}
	fake.idle.Store(true)
	time.Sleep(30 * time.Millisecond)
	if err := wb.flush(); err != nil {
		t.Fatalf("flush after discard: %v", err)
	}
	if a := fake.attempts.Load(); a != 1 {
		t.Fatalf("%d write calls after discard, want none", a-1)
	}
	fake.checkClean(t)
	// Staging works again afterwards and writes only the new bytes.
	fake.idle.Store(false)
	p := bytes.Repeat([]byte{7}, 8192)
	if err := wb.stage(p, wbBase+8<<20); err != nil {
		t.Fatal(err)
	}
	if err := wb.flush(); err != nil {
		t.Fatal(err)
	}
	calls, _ = fake.snapshot()
	if len(calls) != 2 || calls[1].addr != wbBase+8<<20 || !bytes.Equal(calls[1].data, p) {
		t.Fatalf("after discard and a new write: %d calls, want the new 8 KiB", len(calls))
	}
}

// TestWriteBehindConcurrent stages from several goroutines at once (as
// concurrent WriteData calls do), each into its own range, with flushes
// in between; every range must hold its bytes at the end.
func TestWriteBehindConcurrent(t *testing.T) {
	fake := &wbFake{delay: func(n int) time.Duration { return time.Duration(n%3) * 100 * time.Microsecond }}
	wb := &writeBehind{write: fake.write}
	const workers, per = 4, 2 << 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			p := make([]byte, 4096)
			base := wbBase + disk.LogicalAddr(w*per)
			for off := 0; off < per; off += len(p) {
				binaryPut(p, uint32(w), uint32(off))
				if err := wb.stage(p, base+disk.LogicalAddr(off)); err != nil {
					errs <- err
					return
				}
				if off%(1<<20) == 0 && w == 0 {
					if err := wb.flush(); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := wb.flush(); err != nil {
		t.Fatal(err)
	}
	dev := make([]byte, workers*per)
	calls, _ := fake.snapshot()
	for _, c := range calls {
		copy(dev[c.addr-wbBase:], c.data)
	}
	for w := range workers {
		for off := 0; off < per; off += 4096 {
			i := w*per + off
			if got := dev[i : i+8]; !bytes.Equal(got, binaryPut(make([]byte, 8), uint32(w), uint32(off))) {
				t.Fatalf("worker %d offset %d: device holds %x", w, off, got)
			}
		}
	}
	fake.checkClean(t)
}

// binaryPut marks p with a worker and an offset and returns p.
func binaryPut(p []byte, w, off uint32) []byte {
	for i := range 4 {
		p[i], p[4+i] = byte(w>>(8*i)), byte(off>>(8*i))
	}
	return p
}

// TestWriteBehindTxn writes many small pieces through a real Txn: ReadData
// sees them before Commit, and a fresh open reads them after. (The data
// extent has no file item, so btrfs check would rightly complain: the
// image is not checked.)
func TestWriteBehindTxn(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fs, err := Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(wbSeed(t)))
	const n = 6 << 20
	a, err := tx.AllocData(n, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, n)
	rng.Read(want)
	ss := int(tx.SectorSize())
	for off := 0; off < n; {
		size := ss * (1 + rng.Intn(4))
		if rng.Intn(50) == 0 {
			size = stageLarge + ss*rng.Intn(64)
		}
		size = min(size, n-off)
		if err := tx.WriteData(a+disk.LogicalAddr(off), want[off:off+size]); err != nil {
			t.Fatal(err)
		}
		off += size
	}
	// Rewrites of earlier sectors with new bytes: the later ones count.
	for range 20 {
		off := ss * rng.Intn(n/ss)
		rng.Read(want[off : off+ss])
		if err := tx.WriteData(a+disk.LogicalAddr(off), want[off:off+ss]); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, n)
	if err := tx.ReadData(a, got); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(want, got); i >= 0 {
		t.Fatalf("ReadData before Commit differs at %d", a+disk.LogicalAddr(i))
	}
	var sums []byte
	for off := 0; off < n; off += ss {
		sums = tx.CsumType().Sum(sums, want[off:off+ss])
	}
	if err := tx.AddCsums(a, sums); err != nil {
		t.Fatal(err)
	}
	if err := tx.AddDataRef(a, n, 5, 257, 0, 1); err != nil {
		t.Fatal(err)
	}
	// Pieces written after the last read are flushed by Commit.
	rng.Read(want[:ss])
	if err := tx.WriteData(a, want[:ss]); err != nil {
		t.Fatal(err)
	}
	sums = tx.CsumType().Sum(nil, want[:ss])
	if err := tx.AddCsums(a, sums); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs2, err := Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	tx2, err := fs2.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Abort()
	clear(got)
	if err := tx2.ReadData(a, got); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(want, got); i >= 0 {
		t.Fatalf("after Commit and a fresh open the data differs at %d", a+disk.LogicalAddr(i))
	}
	tx2.Abort()
	if err := fs2.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriteBehindReadStaged: bytes still held back are read from memory,
// from the buffer being filled or the one in flight; a range the newer
// buffer only partly holds, or that was written out, is not served.
func TestWriteBehindReadStaged(t *testing.T) {
	block := make(chan struct{})
	var mu sync.Mutex
	written := map[disk.LogicalAddr][]byte{}
	wb := &writeBehind{write: func(p []byte, addr disk.LogicalAddr) error {
		<-block
		mu.Lock()
		written[addr] = append([]byte(nil), p...)
		mu.Unlock()
		return nil
	}}
	const at = disk.LogicalAddr(1 << 30)
	fill := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	if err := wb.stage(append(fill(1, 4096), fill(2, 4096)...), at); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4096)
	if !wb.readStaged(p, at+4096) || !bytes.Equal(p, fill(2, 4096)) {
		t.Fatal("staged bytes not served from the buffer being filled")
	}
	// A write elsewhere sends the first buffer off (blocked in flight).
	if err := wb.stage(fill(3, 4096), at+1<<20); err != nil {
		t.Fatal(err)
	}
	if !wb.readStaged(p, at) || !bytes.Equal(p, fill(1, 4096)) {
		t.Fatal("bytes in flight not served")
	}
	if wb.readStaged(make([]byte, 8192), at+1<<20) {
		t.Fatal("a range past the staged bytes served")
	}
	if wb.readStaged(make([]byte, 8192), at+4096) {
		t.Fatal("a range past the bytes in flight served")
	}
	if !wb.readStaged(p, at+1<<20) || !bytes.Equal(p, fill(3, 4096)) {
		t.Fatal("newest staged bytes not served")
	}
	close(block)
	if err := wb.flush(); err != nil {
		t.Fatal(err)
	}
	if wb.readStaged(p, at) || wb.readStaged(p, at+1<<20) {
		t.Fatal("bytes already written served from memory")
	}
	if !bytes.Equal(written[at][4096:], fill(2, 4096)) || !bytes.Equal(written[at+1<<20], fill(3, 4096)) {
		t.Fatal("written bytes differ")
	}
}
