package blockdev

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// memPage is the allocation unit of Mem: untouched ranges cost nothing, so a
// large sparse device in a test costs only the bytes written to it.
const memPage = 64 << 10

// Mem is an in-memory Device for tests and crash simulation.
//
// Besides storing bytes it keeps a log of the writes made since the last
// Sync. CrashClone uses the log to build what a disk could hold after a power
// failure: everything synced, plus any subset of the later writes. The log
// keeps the bytes each write replaced, so the synced state is recovered by
// undoing the log rather than by keeping a second copy of the device.
type Mem struct {
	size int64 // Immutable.

	mu     sync.RWMutex
	pages  map[int64][]byte // page index -> memPage bytes; absent = zeros. Protected by mu.
	log    []memWrite       // writes since the last Sync, oldest first. Protected by mu.
	syncs  int              // number of Sync calls. Protected by mu.
	closed bool             // Protected by mu.
}

// memWrite is one logged write: where, what, and what it replaced.
type memWrite struct {
	off  int64
	data []byte
	old  []byte
}

// NewMem returns a zero-filled in-memory device of the given size.
func NewMem(size int64) *Mem {
	if size < 0 {
		panic(fmt.Sprintf("blockdev: NewMem with negative size %d", size))
	}
	return &Mem{size: size, pages: make(map[int64][]byte)}
}

// ReadAt implements Device.
func (m *Mem) ReadAt(p []byte, off int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, ErrClosed
	}
	n, err := checkRead(len(p), off, m.size)
	m.copyOut(p[:n], off)
	return n, err
}

// copyOut reads stored bytes into p. Preconditions: m.mu is held.
func (m *Mem) copyOut(p []byte, off int64) {
	for len(p) > 0 {
		idx, in := off/memPage, off%memPage
		n := min(len(p), int(memPage-in))
		if pg, ok := m.pages[idx]; ok {
			copy(p[:n], pg[in:])
		} else {
			clear(p[:n])
		}
		p, off = p[n:], off+int64(n)
	}
}

// copyIn stores p at off. Preconditions: m.mu is held for writing.
func (m *Mem) copyIn(p []byte, off int64) {
	for len(p) > 0 {
		idx, in := off/memPage, off%memPage
		n := min(len(p), int(memPage-in))
		pg, ok := m.pages[idx]
		if !ok {
			pg = make([]byte, memPage)
			m.pages[idx] = pg
		}
		copy(pg[in:], p[:n])
		p, off = p[n:], off+int64(n)
	}
}

// WriteAt implements Device. The write is logged until the next Sync.
func (m *Mem) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	if err := checkWrite(len(p), off, m.size); err != nil {
		return 0, err
	}
	w := memWrite{off: off, data: append([]byte(nil), p...), old: make([]byte, len(p))}
	m.copyOut(w.old, off)
	m.copyIn(p, off)
	m.log = append(m.log, w)
	return len(p), nil
}

// Size implements Device.
func (m *Mem) Size() int64 { return m.size }

// Sync implements Device: every write so far becomes durable.
func (m *Mem) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.log = nil
	m.syncs++
	return nil
}

// Close implements Device. Later calls fail with ErrClosed; clones made
// before are unaffected.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Unsynced returns the number of writes made since the last Sync.
func (m *Mem) Unsynced() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.log)
}

// Syncs returns the number of Sync calls so far.
func (m *Mem) Syncs() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.syncs
}

// Clone returns an independent device with the current contents, all of
// them considered synced.
func (m *Mem) Clone() *Mem {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.cloneLocked()
}

func (m *Mem) cloneLocked() *Mem {
	c := NewMem(m.size)
	for idx, pg := range m.pages {
		c.pages[idx] = append([]byte(nil), pg...)
	}
	return c
}

// CrashClone returns an independent device holding what a disk could
// contain after losing power now: the state at the last Sync plus a random
// subset of the writes made since, each write kept whole or dropped whole
// (with probability 1/2), applied in their original order. The returned
// device has no unsynced writes. m is not changed.
func (m *Mem) CrashClone(rng *rand.Rand) *Mem {
	return m.crashClone(rng, 0)
}

// CrashCloneTorn is CrashClone with torn writes: each write is cut at
// multiples of unit bytes (absolute device offsets) and every piece is kept
// or dropped on its own, as a disk that only guarantees unit-sized atomic
// writes could do. unit <= 0 means whole writes.
func (m *Mem) CrashCloneTorn(rng *rand.Rand, unit int) *Mem {
	return m.crashClone(rng, unit)
}

func (m *Mem) crashClone(rng *rand.Rand, unit int) *Mem {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.cloneLocked()
	for i := len(m.log) - 1; i >= 0; i-- {
		c.copyIn(m.log[i].old, m.log[i].off)
	}
	for _, w := range m.log {
		if unit <= 0 {
			if rng.IntN(2) == 1 {
				c.copyIn(w.data, w.off)
			}
			continue
		}
		for p, off := w.data, w.off; len(p) > 0; {
			n := min(len(p), unit-int(off%int64(unit)))
			if rng.IntN(2) == 1 {
				c.copyIn(p[:n], off)
			}
			p, off = p[n:], off+int64(n)
		}
	}
	return c
}
