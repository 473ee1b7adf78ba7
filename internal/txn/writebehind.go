package txn

import (
	"fmt"
	"sync"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Small data writes are gathered and written behind the caller. Building
// an image writes thousands of small files one after another into one
// free range; one pwrite each costs more in system calls than in bytes,
// and it holds up the goroutine that makes the changes. So writes below
// stageLarge are copied into a staging buffer of stageSize; one that does
// not continue the staged bytes on disk, or does not fit, sends the
// buffer off and starts the next. A buffer sent off is written by its own
// goroutine while the next fills.
//
// Order is kept: at most one buffer is in flight, and a write that is
// not staged (a large one) first waits until everything staged is on the
// device, so writes reach the device in the order they were made (a
// range released and handed out again is never overwritten by its old
// contents). Anything that reads data from the device (ReadData, the
// filesystem's read side through FlushData) and Commit flush first.
// Writes go to space this transaction allocated, never to committed
// data, so a write that fails behind the caller's back leaves the last
// commit intact: the error comes back from the next data call or from
// Commit, and the transaction aborts.
const (
	stageSize  = 4 << 20
	stageLarge = 1 << 20
)

// writeBehind is a Txn's staging of small data writes.
type writeBehind struct {
	write func(p []byte, addr disk.LogicalAddr) error
	// pool keeps staging buffers from one transaction to the next: with
	// an fsync every few writes a transaction lives a few milliseconds,
	// and a fresh 4 MiB buffer each time cost more in clearing memory
	// than the writes themselves (a CPU profile of sysbench-like load).
	pool *sync.Pool

	mu    sync.Mutex
	buf   []byte // staged bytes, for addr onwards
	addr  disk.LogicalAddr
	spare []byte // a buffer to stage into next
	err   error  // the first failed write

	// The buffer being written and its error: the writing goroutine
	// sets flyErr; both are read only after inflight.Wait.
	inflight sync.WaitGroup
	flying   []byte
	flyAddr  disk.LogicalAddr
	flyErr   error
}

// stage writes p at addr, now or later. It returns the error of an
// earlier write that failed.
func (wb *writeBehind) stage(p []byte, addr disk.LogicalAddr) error {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if len(p) >= stageLarge {
		if err := wb.drainLocked(); err != nil {
			return err
		}
		wb.err = wb.write(p, addr) // sticks, as a failure behind the caller's back does
		return wb.err
	}
	if len(wb.buf) > 0 && (addr != wb.addr+disk.LogicalAddr(len(wb.buf)) || len(wb.buf)+len(p) > stageSize) {
		wb.kickLocked()
	}
	if wb.err != nil {
		return wb.err
	}
	if len(wb.buf) == 0 {
		wb.addr = addr
		if wb.buf == nil {
			wb.buf, wb.spare = wb.spare, nil
		}
		if wb.buf == nil && wb.pool != nil {
			if b, ok := wb.pool.Get().(*[]byte); ok {
				wb.buf = (*b)[:0]
			}
		}
		if wb.buf == nil {
			wb.buf = make([]byte, 0, stageSize)
		}
	}
	wb.buf = append(wb.buf, p...)
	return nil
}

// now runs write, a write that is not staged, after everything staged
// is on the device; its error sticks as a large write's does.
func (wb *writeBehind) now(write func() error) error {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if err := wb.drainLocked(); err != nil {
		return err
	}
	wb.err = write()
	return wb.err
}

// landLocked waits for the buffer in flight, takes its error and keeps
// the buffer for staging again.
func (wb *writeBehind) landLocked() {
	wb.inflight.Wait()
	if wb.flying == nil {
		return
	}
	if wb.flyErr != nil && wb.err == nil {
		wb.err = fmt.Errorf("txn: data written behind: %w", wb.flyErr)
	}
	wb.spare, wb.flying, wb.flyErr = wb.flying[:0], nil, nil
}

// kickLocked hands the staged bytes to a goroutine that writes them,
// once the buffer before them is written.
func (wb *writeBehind) kickLocked() {
	wb.landLocked()
	if wb.err != nil {
		wb.buf = wb.buf[:0]
		return
	}
	b, at := wb.buf, wb.addr
	wb.buf, wb.flying, wb.flyAddr = nil, b, at
	wb.inflight.Add(1)
	go func() {
		defer wb.inflight.Done()
		wb.flyErr = wb.write(b, at)
	}()
}

// readStaged copies into p the bytes at [addr, +len(p)) when all of them
// are still held here: in the buffer being filled, or else in the one in
// flight (its writer only reads it, and it is not reused before
// landLocked, which needs mu). The buffer being filled is newer than the
// one in flight, so a range it touches at all is served from it or not
// at all.
func (wb *writeBehind) readStaged(p []byte, addr disk.LogicalAddr) bool {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.err != nil || len(p) == 0 {
		return false
	}
	end := addr + disk.LogicalAddr(len(p))
	inside := func(b []byte, at disk.LogicalAddr) (ok, touches bool) {
		bend := at + disk.LogicalAddr(len(b))
		return len(b) > 0 && addr >= at && end <= bend, len(b) > 0 && addr < bend && end > at
	}
	if ok, touches := inside(wb.buf, wb.addr); ok {
		copy(p, wb.buf[addr-wb.addr:])
		return true
	} else if touches {
		return false
	}
	if ok, _ := inside(wb.flying, wb.flyAddr); ok {
		copy(p, wb.flying[addr-wb.flyAddr:])
		return true
	}
	return false
}

// drainLocked writes everything staged and waits for it.
func (wb *writeBehind) drainLocked() error {
	wb.landLocked()
	if wb.err == nil && len(wb.buf) > 0 {
		if err := wb.write(wb.buf, wb.addr); err != nil {
			wb.err = fmt.Errorf("txn: data written behind: %w", err)
		}
	}
	if wb.buf != nil {
		wb.buf = wb.buf[:0]
	}
	return wb.err
}

// start sends what is staged off to be written, without waiting: Commit
// overlaps that write with its bookkeeping and flushes before it syncs.
func (wb *writeBehind) start() {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.err == nil && len(wb.buf) > 0 {
		wb.kickLocked()
	}
}

// failed returns the first error of any write so far, without waiting.
func (wb *writeBehind) failed() error {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return wb.err
}

// flush writes everything staged and returns the first error of any
// write so far.
func (wb *writeBehind) flush() error {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return wb.drainLocked()
}

// discard waits for the write in flight, drops what is staged and gives
// the buffers back to the pool.
func (wb *writeBehind) discard() {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	wb.landLocked()
	for _, b := range [][]byte{wb.buf, wb.spare} {
		if wb.pool != nil && cap(b) == stageSize {
			b = b[:0]
			wb.pool.Put(&b)
		}
	}
	wb.buf, wb.spare = nil, nil
}

// ReadStaged fills p with the data at addr when this transaction's
// written-behind bytes still hold all of it (true), without a device
// write or read; the caller reads the device (after FlushData) when it
// returns false.
func (t *Txn) ReadStaged(addr disk.LogicalAddr, p []byte) bool {
	return t.wb.readStaged(p, addr)
}

// FlushData writes the data writes still held back (written behind) and
// waits for them, so that reading the device shows them; it returns the
// error of any data write that failed. Readers of data written in this
// transaction through another path than ReadData call it first.
func (t *Txn) FlushData() error {
	return t.wb.flush()
}
