package check

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// sorter collects records and hands them back in byte order, holding at
// most about limit bytes in memory: past it, the buffered records are
// sorted and written to a temporary file (a run), and the runs are merged
// when read back (docs/design/0024-check-memory.md). Callers encode their
// keys big-endian at the front of each record, so byte order is key order,
// and equal records are kept (a multiset).
//
// A sorter is used by one goroutine: Add until done, then Merge once.
type sorter struct {
	limit int64
	dir   string // "" = os.TempDir()

	buf   [][]byte // records, slices of arena chunks
	arena []byte   // the chunk records are copied into
	bytes int64
	runs  []*os.File
	err   error
}

// recOverhead is what one buffered record costs beside its bytes (its
// slice header in buf).
const recOverhead = 24

// arenaChunk is the size of the chunks records are copied into: one
// allocation per chunk, not one per record (a million names made a
// tenth of a check's CPU time in allocations and collections).
const arenaChunk = 1 << 20

func newSorter(limit int64, dir string) *sorter {
	if limit < 1<<10 {
		limit = 1 << 10
	}
	return &sorter{limit: limit, dir: dir}
}

// Add copies rec into the sorter.
func (s *sorter) Add(rec []byte) {
	if s.err != nil {
		return
	}
	if cap(s.arena)-len(s.arena) < len(rec) {
		s.arena = make([]byte, 0, max(arenaChunk, len(rec)))
	}
	at := len(s.arena)
	s.arena = append(s.arena, rec...)
	s.buf = append(s.buf, s.arena[at:len(s.arena):len(s.arena)])
	s.bytes += int64(len(rec)) + recOverhead
	if s.bytes >= s.limit {
		s.spill()
	}
}

// Runs is the number of runs written to temporary files so far.
func (s *sorter) Runs() int { return len(s.runs) }

func (s *sorter) spill() {
	slices.SortFunc(s.buf, bytes.Compare)
	f, err := os.CreateTemp(s.dir, "gobtrfs-check-*.run")
	if err != nil {
		s.err = fmt.Errorf("check: spilling to a temporary file: %w", err)
		return
	}
	// The file is removed at once; the open descriptor keeps it until
	// Close, so nothing is left behind if the process dies.
	os.Remove(f.Name())
	s.runs = append(s.runs, f)
	w := bufio.NewWriterSize(f, 64<<10)
	var hdr [binary.MaxVarintLen64]byte
	for _, r := range s.buf {
		n := binary.PutUvarint(hdr[:], uint64(len(r)))
		w.Write(hdr[:n])
		w.Write(r)
	}
	if err := w.Flush(); err != nil {
		s.err = fmt.Errorf("check: spilling to a temporary file: %w", err)
		return
	}
	clear(s.buf)
	s.buf = s.buf[:0]
	s.bytes = 0
	// Every record is in the run now: the current chunk is free again
	// (the others go to the collector).
	s.arena = s.arena[:0]
}

// Merge returns the records in byte order. The sorter may not be added to
// afterwards; it may be merged again (each Merge starts from the first
// record and invalidates the iterators before it). Close the sorter (or
// the last iterator) to release the runs.
func (s *sorter) Merge() *mergeIter {
	it := &mergeIter{s: s, err: s.err}
	if s.err != nil {
		return it
	}
	slices.SortFunc(s.buf, bytes.Compare)
	srcs := []*runSource{{mem: s.buf}}
	for _, f := range s.runs {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			it.err = fmt.Errorf("check: reading a spilled run: %w", err)
			return it
		}
		srcs = append(srcs, &runSource{r: bufio.NewReaderSize(f, 64<<10)})
	}
	for _, src := range srcs {
		if src.advance(&it.err) {
			it.h = append(it.h, src)
		}
	}
	heap.Init(&it.h)
	return it
}

// Close releases the sorter's temporary files.
func (s *sorter) Close() {
	for _, f := range s.runs {
		f.Close()
	}
	s.runs = nil
	s.buf = nil
	s.arena = nil
}

// runSource is one sorted run: the in-memory tail, or a spilled file.
type runSource struct {
	mem [][]byte
	r   *bufio.Reader
	cur []byte
}

// advance loads the next record into cur; false at the end (or on error,
// recorded in *err).
func (src *runSource) advance(err *error) bool {
	if src.r == nil {
		if len(src.mem) == 0 {
			return false
		}
		src.cur, src.mem = src.mem[0], src.mem[1:]
		return true
	}
	n, e := binary.ReadUvarint(src.r)
	if e != nil {
		if !errors.Is(e, io.EOF) && *err == nil {
			*err = fmt.Errorf("check: reading a spilled run: %w", e)
		}
		return false
	}
	rec := make([]byte, n)
	if _, e := io.ReadFull(src.r, rec); e != nil {
		if *err == nil {
			*err = fmt.Errorf("check: reading a spilled run: %w", e)
		}
		return false
	}
	src.cur = rec
	return true
}

type runHeap []*runSource

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return bytes.Compare(h[i].cur, h[j].cur) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runSource)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergeIter yields a sorter's records in order.
type mergeIter struct {
	s   *sorter
	h   runHeap
	err error
}

// Next returns the next record, or false at the end; the record stays
// valid after later calls.
func (it *mergeIter) Next() ([]byte, bool) {
	if len(it.h) == 0 {
		return nil, false
	}
	top := it.h[0]
	rec := top.cur
	if top.advance(&it.err) {
		heap.Fix(&it.h, 0)
	} else {
		heap.Pop(&it.h)
	}
	return rec, true
}

// Err is the first error met while spilling or merging.
func (it *mergeIter) Err() error { return it.err }

// Close releases the sorter's temporary files.
func (it *mergeIter) Close() { it.s.Close() }
