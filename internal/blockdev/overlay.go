package blockdev

import (
	"sync"
)

// overlayPage is the copy-on-write unit of Overlay.
const overlayPage = 4096

// Overlay is a Device that reads from a base device and keeps every write
// in memory: the base is never written. A read-only open of a filesystem
// whose log must be replayed first (docs/design/0016) replays it into an
// Overlay, so readers see what a kernel mount would show while the image
// stays as it is. Only the pages written cost memory.
type Overlay struct {
	base Device
	// keepBase: Close leaves the base open (CloseBase closes it).
	keepBase bool

	mu     sync.RWMutex
	pages  map[int64][]byte // page index -> overlayPage bytes written
	closed bool
}

// NewOverlay returns an Overlay over base. With keepBase, Close does not
// close base, so that the same written pages can be handed to a second
// user (Reopen); CloseBase closes it.
func NewOverlay(base Device, keepBase bool) *Overlay {
	return &Overlay{base: base, keepBase: keepBase, pages: map[int64][]byte{}}
}

// Reopen returns a new Overlay over the same base holding the same
// written pages (copied): what the first user wrote, the second reads.
func (o *Overlay) Reopen(keepBase bool) *Overlay {
	o.mu.RLock()
	defer o.mu.RUnlock()
	n := &Overlay{base: o.base, keepBase: keepBase, pages: make(map[int64][]byte, len(o.pages))}
	for i, p := range o.pages {
		n.pages[i] = p
	}
	return n
}

// ReadAt implements Device.
func (o *Overlay) ReadAt(p []byte, off int64) (int, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return 0, ErrClosed
	}
	n, err := checkRead(len(p), off, o.base.Size())
	p = p[:n]
	if len(o.pages) == 0 {
		m, rerr := o.base.ReadAt(p, off)
		if rerr != nil && m < n {
			return m, rerr
		}
		return n, err
	}
	for len(p) > 0 {
		idx, in := off/overlayPage, off%overlayPage
		k := min(int64(len(p)), overlayPage-in)
		if pg, ok := o.pages[idx]; ok {
			copy(p[:k], pg[in:])
		} else {
			// Read the run of unwritten pages from the base at once.
			for k < int64(len(p)) {
				if _, ok := o.pages[(off+k)/overlayPage]; ok {
					break
				}
				k = min(int64(len(p)), k+overlayPage)
			}
			if m, rerr := o.base.ReadAt(p[:k], off); rerr != nil && int64(m) < k {
				return n - len(p) + m, rerr
			}
		}
		p, off = p[k:], off+k
	}
	return n, err
}

// WriteAt implements Device: the bytes go to memory only.
func (o *Overlay) WriteAt(p []byte, off int64) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, ErrClosed
	}
	if err := checkWrite(len(p), off, o.base.Size()); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		idx, in := off/overlayPage, off%overlayPage
		k := min(int64(len(p)), overlayPage-in)
		pg, ok := o.pages[idx]
		if !ok {
			pg = make([]byte, overlayPage)
			if in != 0 || k != overlayPage {
				start := idx * overlayPage
				m, err := o.base.ReadAt(pg[:min(overlayPage, o.base.Size()-start)], start)
				if err != nil && int64(m) < min(overlayPage, o.base.Size()-start) {
					return n - len(p), err
				}
			}
		} else {
			// Pages may be shared with an Overlay made by Reopen.
			pg = append([]byte(nil), pg...)
		}
		copy(pg[in:], p[:k])
		o.pages[idx] = pg
		p, off = p[k:], off+k
	}
	return n, nil
}

// Size implements Device.
func (o *Overlay) Size() int64 { return o.base.Size() }

// Sync implements Device: memory is as durable as it gets.
func (o *Overlay) Sync() error {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return ErrClosed
	}
	return nil
}

// Close implements Device: the written pages are dropped, and the base
// closed unless the Overlay was made to keep it.
func (o *Overlay) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	o.closed = true
	if o.keepBase {
		return nil
	}
	return o.base.Close()
}

// CloseBase closes the base device (for an Overlay made with keepBase
// whose users are all done).
func (o *Overlay) CloseBase() error { return o.base.Close() }
