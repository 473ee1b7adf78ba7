package btrfs

import (
	"io"
	"io/fs"
	"sync/atomic"
	"syscall"
)

// writeFromBatch is how much of a stream WriteFrom holds and writes per
// change: its pieces are compressed and checksummed in parallel.
const writeFromBatch = 8 << 20

// WriteFrom copies r to the existing regular file name from offset off
// until r ends, in batches of up to 8 MiB, each one change (a failure
// leaves the batches before it written). Three goroutines overlap: one
// reads the next batch, one compresses and checksums the one before
// (PrepareData, on every core), and the caller's writes the one before
// that. It returns the bytes written; an error of r is returned with the
// count written before it.
func (fsys *FS) WriteFrom(name string, r io.Reader, off int64) (int64, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: name, Err: syscall.EINVAL}
	}
	w, err := fsys.writable("write", name)
	if err != nil {
		return 0, err
	}
	read := make(chan readBatch, 1)
	prepared := make(chan readBatch, 1)
	spare := make(chan []byte, 2) // written buffers, for the reader to fill again
	done := make(chan struct{})
	// The file's policy as the last write left it; nil until the first
	// write reports it, so no batch is prepared for a policy the file
	// does not have (inode flags).
	var pol atomic.Pointer[dataPolicy]
	defer func() {
		// r is not read after WriteFrom returns: wait for the reader
		// (which the preparer's end waits for).
		close(done)
		for range prepared {
		}
	}()
	// The sector size comes from the open's fixed policy: a Commit on
	// another goroutine replaces the read side (and fsys.sb) meanwhile.
	ss := int64(w.base.ss)
	go readBatches(r, off%ss, read, spare, done)
	go fsys.prepareBatches(read, prepared, off, ss, &pol, done)
	var total int64
	for b := range prepared {
		if len(b.data) > 0 {
			var after dataPolicy
			if _, err := fsys.writeAtPolicy(name, b.data, off+total, b.pd, &after); err != nil {
				return total, err
			}
			pol.Store(&after)
			total += int64(len(b.data))
		}
		select {
		case spare <- b.data[:cap(b.data)]:
		default:
		}
		switch {
		case b.err == io.EOF || b.err == io.ErrUnexpectedEOF:
			return total, nil
		case b.err != nil:
			return total, b.err
		}
	}
	return total, nil
}

// readBatch is one batch read by readBatches: its bytes, the error that
// ended the read (io.EOF or io.ErrUnexpectedEOF at the end), and the
// bytes prepared (or nil).
type readBatch struct {
	data []byte
	err  error
	pd   *PreparedData
}

// prepareBatches prepares the batches of in that start on a sector
// boundary, with the policy the file had after the last write (a batch
// prepared under another one is prepared again by its write), and passes
// every batch on to out, in order, until in closes.
func (fsys *FS) prepareBatches(in <-chan readBatch, out chan<- readBatch, off, ss int64, pol *atomic.Pointer[dataPolicy], done <-chan struct{}) {
	defer close(out)
	at := off
	for b := range in {
		select {
		case <-done:
			for range in { // let the reader see done and end
			}
			return
		default:
		}
		if p := pol.Load(); p != nil && len(b.data) > 0 && at%ss == 0 {
			b.pd, _ = fsys.prepareWith(b.data, *p) // on error the write prepares and reports
		}
		at += int64(len(b.data))
		select {
		case out <- b:
		case <-done:
			for range in { // let the reader see done and end
			}
			return
		}
	}
}

// readBatches reads r in batches into out until r ends or done closes.
// The first batch ends on a sector boundary (skew is the write offset's
// distance past one), so later ones start on one and need no
// read-modify-write. Batches start at 64 KiB and double while r fills
// them, so small files cost little and large ones stream in 8 MiB
// batches. A buffer comes from spare when the writer has handed one back
// that is large enough (WriteAt keeps no reference to what it wrote), or
// is made new.
func readBatches(r io.Reader, skew int64, out chan<- readBatch, spare <-chan []byte, done <-chan struct{}) {
	defer close(out)
	size := min(64<<10, writeFromBatch)
	for first := true; ; first = false {
		n := size
		if first {
			n -= int(skew)
		}
		var buf []byte
		select {
		case b := <-spare:
			if cap(b) >= n {
				buf = b[:n]
			}
		default:
		}
		if buf == nil {
			buf = make([]byte, n)
		}
		select {
		case <-done: // the writer stopped: read no more of r
			return
		default:
		}
		k, err := io.ReadFull(r, buf)
		select {
		case out <- readBatch{data: buf[:k], err: err}:
		case <-done:
			return
		}
		if err != nil {
			return
		}
		if k == n && size < writeFromBatch {
			size = min(2*size, writeFromBatch)
		}
	}
}
