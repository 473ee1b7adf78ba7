package blockdev

import (
	"errors"
	"fmt"
	"sync"
)

// ErrInjected is the error Faulty returns for an injected failure unless
// Faulty.Err says otherwise.
var ErrInjected = errors.New("blockdev: injected I/O error")

// Op names a kind of device operation, for Faulty.
type Op int

// Operations that Faulty counts and can fail.
const (
	OpRead Op = iota
	OpWrite
	OpSync
)

// String returns "read", "write" or "sync".
func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Faulty wraps a Device and fails chosen operations, for testing error
// paths. Operations are counted per kind from 1; FailAt(OpWrite, 3) makes the
// third write fail. A failed write or sync does not reach the wrapped device,
// so with a Mem underneath it models a lost write.
type Faulty struct {
	dev Device // Immutable.

	mu     sync.Mutex
	count  [3]int              // operations seen, per Op. Protected by mu.
	failAt [3]int              // 1-based op number to fail, 0 = none. Protected by mu.
	sticky [3]bool             // keep failing after failAt. Protected by mu.
	hook   func(FaultOp) error // Protected by mu.
	err    error               // Protected by mu.
}

// FaultOp describes one operation offered to a Faulty hook.
type FaultOp struct {
	Op  Op
	N   int   // 1-based count of this kind of operation, including this one
	Off int64 // offset (reads and writes)
	Len int   // length (reads and writes)
}

// NewFaulty wraps d. With no failures configured it passes everything
// through.
func NewFaulty(d Device) *Faulty { return &Faulty{dev: d, err: ErrInjected} }

// FailAt makes the n-th operation of kind op fail (n counts from 1, over the
// device's whole life). If sticky, every later operation of that kind fails
// too. n = 0 clears the setting.
func (f *Faulty) FailAt(op Op, n int, sticky bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt[op], f.sticky[op] = n, sticky
}

// SetHook installs a function consulted before every operation; a non-nil
// result fails the operation with that error. It runs with f's lock held and
// must not call back into f.
func (f *Faulty) SetHook(h func(FaultOp) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// SetErr sets the error returned for failures chosen by FailAt.
func (f *Faulty) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Count returns how many operations of kind op were attempted.
func (f *Faulty) Count(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[op]
}

// check counts an operation and decides whether it fails.
func (f *Faulty) check(op Op, off int64, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count[op]++
	c := f.count[op]
	if at := f.failAt[op]; at > 0 && (c == at || (f.sticky[op] && c > at)) {
		return fmt.Errorf("%s #%d at offset %d: %w", op, c, off, f.err)
	}
	if f.hook != nil {
		return f.hook(FaultOp{Op: op, N: c, Off: off, Len: n})
	}
	return nil
}

// ReadAt implements Device.
func (f *Faulty) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check(OpRead, off, len(p)); err != nil {
		return 0, err
	}
	return f.dev.ReadAt(p, off)
}

// WriteAt implements Device.
func (f *Faulty) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check(OpWrite, off, len(p)); err != nil {
		return 0, err
	}
	return f.dev.WriteAt(p, off)
}

// Size implements Device.
func (f *Faulty) Size() int64 { return f.dev.Size() }

// Sync implements Device.
func (f *Faulty) Sync() error {
	if err := f.check(OpSync, 0, 0); err != nil {
		return err
	}
	return f.dev.Sync()
}

// Close implements Device; it closes the wrapped device.
func (f *Faulty) Close() error { return f.dev.Close() }
