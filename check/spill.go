package check

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
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

	// The buffered records, copied into 1 MiB chunks and named by
	// pointer-free references: a million slice headers were a fifth of
	// the fs-tree pass's time in growing and scanning them.
	refs   []recRef
	tmp    []recRef // the radix sort's second buffer
	chunks [][]byte
	// used is how many chunks hold records; the rest are kept, empty,
	// from an earlier run: refilling them touches no new memory (fresh
	// pages were a third of Add's time).
	used  int
	bytes int64
	runs  []*os.File
	err   error
}

// recRef names one buffered record: n bytes at off in chunks[chunk]. key
// is its first 8 bytes as a big-endian number (zero-padded), so most
// comparisons of the sort are of two integers.
type recRef struct {
	key           uint64
	chunk, off, n uint32
}

// recOverhead is what one buffered record costs beside its bytes: its
// recRef, and its place in the radix sort's second buffer.
const recOverhead = 48

func recKey(rec []byte) uint64 {
	if len(rec) >= 8 {
		return binary.BigEndian.Uint64(rec)
	}
	var b [8]byte
	copy(b[:], rec)
	return binary.BigEndian.Uint64(b[:])
}

func (s *sorter) rec(r recRef) []byte {
	return s.chunks[r.chunk][r.off : r.off+r.n : r.off+r.n]
}

// sortBuffered sorts the buffered records: a radix sort on their
// integer keys (only the bytes in which the keys differ), then a
// comparison sort of each run of equal keys. The records of a tree come
// in a few nearly sorted streams with small keys (inode numbers,
// addresses); a comparison sort of them was most of a spill's time.
func (s *sorter) sortBuffered() {
	refs := s.refs
	cmpRefs := func(a, b recRef) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return bytes.Compare(s.rec(a), s.rec(b))
	}
	if len(refs) < 1024 {
		slices.SortFunc(refs, cmpRefs)
		return
	}
	lo, hi := refs[0].key, refs[0].key
	for _, r := range refs {
		lo, hi = min(lo, r.key), max(hi, r.key)
	}
	if cap(s.tmp) < len(refs) {
		s.tmp = make([]recRef, len(refs))
	}
	src, dst := refs, s.tmp[:len(refs)]
	for shift := 0; shift < bits.Len64(hi-lo); shift += 8 {
		var count [257]int
		for _, r := range src {
			count[((r.key-lo)>>shift)&0xff+1]++
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, r := range src {
			b := ((r.key - lo) >> shift) & 0xff
			dst[count[b]] = r
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &refs[0] {
		copy(refs, src)
	}
	for i := 0; i < len(refs); {
		j := i + 1
		for j < len(refs) && refs[j].key == refs[i].key {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(refs[i:j], cmpRefs)
		}
		i = j
	}
}

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
	if s.refs == nil {
		// Room for a run's references at once: growing the slice by
		// doubling was a third of Add's time.
		s.refs = make([]recRef, 0, min(s.limit/(recOverhead+8), 1<<22))
	}
	last := s.used - 1
	if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < len(rec) {
		if s.used == len(s.chunks) || cap(s.chunks[s.used]) < len(rec) {
			s.chunks = slices.Insert(s.chunks, s.used, make([]byte, 0, max(arenaChunk, len(rec))))
		}
		s.used++
		last++
	}
	at := len(s.chunks[last])
	s.chunks[last] = append(s.chunks[last], rec...)
	s.refs = append(s.refs, recRef{recKey(rec), uint32(last), uint32(at), uint32(len(rec))})
	s.bytes += int64(len(rec)) + recOverhead
	if s.bytes >= s.limit {
		s.spill()
	}
}

// Runs is the number of runs written to temporary files so far.
func (s *sorter) Runs() int { return len(s.runs) }

func (s *sorter) spill() {
	s.sortBuffered()
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
	for _, ref := range s.refs {
		r := s.rec(ref)
		n := binary.PutUvarint(hdr[:], uint64(len(r)))
		w.Write(hdr[:n])
		w.Write(r)
	}
	if err := w.Flush(); err != nil {
		s.err = fmt.Errorf("check: spilling to a temporary file: %w", err)
		return
	}
	s.refs = s.refs[:0]
	s.bytes = 0
	// Every record is in the run now: the chunks are free again.
	for i := range s.chunks[:s.used] {
		s.chunks[i] = s.chunks[i][:0]
	}
	s.used = 0
}

// Merge returns the records in byte order. The sorter may not be added to
// afterwards; it may be merged again (each Merge starts from the first
// record and invalidates the iterators before it). Close the sorter (or
// the last iterator) to release the runs.
func (s *sorter) Merge() *mergeIter { return mergeAll(s) }

// mergeAll returns the records of several sorters in byte order, as one
// sorter holding them all would (Merge's rules apply to each).
func mergeAll(ss ...*sorter) *mergeIter {
	it := &mergeIter{ss: ss}
	var srcs []*runSource
	for _, s := range ss {
		if s.err != nil {
			it.err = s.err
			return it
		}
		s.sortBuffered()
		srcs = append(srcs, &runSource{s: s, mem: s.refs})
		for _, f := range s.runs {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				it.err = fmt.Errorf("check: reading a spilled run: %w", err)
				return it
			}
			srcs = append(srcs, &runSource{r: bufio.NewReaderSize(f, 64<<10)})
		}
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
	s.refs = nil
	s.tmp = nil
	s.chunks, s.used = nil, 0
}

// runSource is one sorted run: the in-memory tail, or a spilled file.
type runSource struct {
	s   *sorter
	mem []recRef
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
		src.cur, src.mem = src.s.rec(src.mem[0]), src.mem[1:]
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
	ss  []*sorter
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

// Close releases the sorters' temporary files.
func (it *mergeIter) Close() {
	for _, s := range it.ss {
		s.Close()
	}
}
