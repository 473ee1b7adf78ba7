package fileio

import (
	"math/rand/v2"
	"sync"
)

// op is what one request does.
type op uint8

const (
	opRead op = iota
	opWrite
	opFsync
)

// request is one event of the run: a read or write of size bytes at off
// of file, or an fsync of file.
type request struct {
	op      op
	file    int
	off     int64
	size    int
	version uint64 // writes with Verify: the data's version (> 0)
}

// requests hands out the run's requests to every thread, as sysbench's
// file_get_seq_request and file_get_rnd_request do: one sequence under
// one lock, so fsync rounds and rndrw's read/write balance are global.
type requests struct {
	cfg *resolved

	mu        sync.Mutex
	cond      sync.Cond         // busy changed (Verify only)
	rng       *rand.Rand        // protected by mu
	issued    int64             // events handed out; protected by mu
	performed int64             // reads and writes handed out (sysbench's req_performed)
	dirty     bool              // a write since the last fsync round
	fsyncNext int               // next file of the running fsync round
	seqFile   int               // sequential modes: where the next request goes
	seqPos    int64             // "
	reads     int64             // rndrw: reads and writes completed, for the ratio
	writes    int64             // "
	version   uint64            // last version handed out (Verify)
	busy      map[[2]int64]bool // Verify: blocks a thread is reading or writing
	stopped   bool
}

func newRequests(cfg *resolved) *requests {
	q := &requests{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x66696c65696f))}
	q.cond.L = &q.mu
	if cfg.Verify {
		q.busy = map[[2]int64]bool{}
	}
	return q
}

// stop makes next return false from now on.
func (q *requests) stop() {
	q.mu.Lock()
	q.stopped = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// next returns the next request, or false when the run is over (stopped,
// or Events handed out).
func (q *requests) next() (request, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.stopped || (q.cfg.Events > 0 && q.issued >= q.cfg.Events) {
			return request{}, false
		}
		// sysbench: after every FsyncFreq requests, if anything was
		// written since the last round, the next FileNum events fsync
		// the files in turn (performed does not move during the round).
		if !q.cfg.noFsync && q.dirty && q.performed%int64(q.cfg.FsyncFreq) == 0 {
			r := request{op: opFsync, file: q.fsyncNext}
			q.fsyncNext++
			if q.fsyncNext == q.cfg.FileNum {
				q.fsyncNext, q.dirty = 0, false
			}
			q.issued++
			return r, true
		}
		r, ok := q.pick()
		if !ok {
			// Verify: the block is another thread's; wait for it (the
			// sequential modes cannot choose another).
			q.cond.Wait()
			continue
		}
		q.issued++
		q.performed++
		if r.op == opWrite {
			q.dirty = true
			if q.cfg.Verify {
				q.version++
				r.version = q.version
			}
		}
		if q.busy != nil {
			q.busy[[2]int64{int64(r.file), r.off}] = true
		}
		return r, true
	}
}

// pick chooses the next read or write; false when Verify finds the
// sequential block busy. Called with mu held.
func (q *requests) pick() (request, bool) {
	c := q.cfg
	switch c.Mode {
	case SeqWr, SeqRewr, SeqRd:
		o := opRead
		if c.Mode != SeqRd {
			o = opWrite
		}
		if q.seqFile == c.FileNum {
			q.seqFile, q.seqPos = 0, 0 // every file done: start again
		}
		r := request{op: o, file: q.seqFile, off: q.seqPos, size: int(min(int64(c.FileBlockSize), q.fileSize()-q.seqPos))}
		if q.busy != nil && q.busy[[2]int64{int64(r.file), r.off}] {
			return r, false
		}
		q.seqPos += int64(r.size)
		if q.seqPos == q.fileSize() {
			q.seqFile++
			q.seqPos = 0
		}
		return r, true
	}
	o := opWrite
	switch c.Mode {
	case RndRd:
		o = opRead
	case RndRw:
		if float64(q.reads+1)/float64(q.writes+1) < c.RWRatio {
			o = opRead
		}
	}
	for {
		// A uniformly random block-aligned position over all files.
		pos := int64(q.rng.Float64() * float64(c.FileTotalSize))
		pos -= pos % int64(c.FileBlockSize)
		file := int(pos / q.fileSize())
		if file >= c.FileNum {
			continue // the few bytes past FileNum*fileSize
		}
		off := pos % q.fileSize()
		if q.busy != nil && q.busy[[2]int64{int64(file), off}] {
			continue // sysbench --validate: another thread's block; choose again
		}
		return request{op: o, file: file, off: off, size: int(min(int64(c.FileBlockSize), q.fileSize()-off))}, true
	}
}

func (q *requests) fileSize() int64 { return q.cfg.fileSize }

// done records a completed read or write: rndrw's balance counts
// completions, as sysbench's does, and Verify frees the block.
func (q *requests) done(r request) {
	if r.op == opFsync {
		return
	}
	q.mu.Lock()
	if r.op == opRead {
		q.reads++
	} else {
		q.writes++
	}
	if q.busy != nil {
		delete(q.busy, [2]int64{int64(r.file), r.off})
		q.cond.Broadcast()
	}
	q.mu.Unlock()
}
