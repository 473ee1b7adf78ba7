package mkfs

import (
	"bytes"
	"io"
)

// prefetchMax is the largest file whose data the prefetcher reads ahead
// into memory; larger files are streamed by the writer as they come.
const prefetchMax = 256 << 10

// prefetchDepth is how many entries the prefetcher may run ahead: at most
// prefetchDepth*prefetchMax bytes of file data are held.
const prefetchDepth = 128

// prefetchItem is one entry handed from the reading goroutine to Next.
type prefetchItem struct {
	e       *Entry
	err     error
	release chan struct{} // non-nil: the reader waits for it before its next Next
}

// prefetchSource reads a Source ahead on its own goroutine: entries, and
// the data of small files, so that reading the input (often a cold disk)
// overlaps with writing the image. The order of entries is kept. A large
// file's data is left to its Open, which a Source allows only until its
// next Next: the reading goroutine waits until the consumer moves on.
type prefetchSource struct {
	src  Source
	out  chan *prefetchItem
	stop chan struct{}
	done chan struct{}
	last *prefetchItem
}

// newPrefetch starts reading src ahead.
func newPrefetch(src Source) *prefetchSource {
	p := &prefetchSource{src: src, out: make(chan *prefetchItem, prefetchDepth),
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// run is the reading goroutine.
func (p *prefetchSource) run() {
	defer close(p.done)
	defer close(p.out)
	for {
		e, err := p.src.Next()
		it := &prefetchItem{e: e, err: err}
		if err == nil && e.Open != nil {
			if n := e.DataBytes(); n <= prefetchMax {
				readAhead(e, n)
			} else {
				it.release = make(chan struct{})
			}
		}
		select {
		case p.out <- it:
		case <-p.stop:
			return
		}
		if err != nil {
			return
		}
		if it.release != nil {
			select {
			case <-it.release:
			case <-p.stop:
				return
			}
		}
	}
}

// readAhead reads the n data bytes of e now and replaces its Open by one
// that serves them from memory (or reports the read's error).
func readAhead(e *Entry, n int64) {
	open := e.Open
	var data []byte
	r, err := open()
	if err == nil {
		data = make([]byte, n)
		var k int
		k, err = io.ReadFull(r, data)
		data = data[:k]
		if err == io.ErrUnexpectedEOF {
			err = nil // the writer reports the short file with its path
		}
		r.Close()
	}
	e.Open = func() (io.ReadCloser, error) {
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}
}

// Next implements Source.
func (p *prefetchSource) Next() (*Entry, error) {
	if p.last != nil && p.last.release != nil {
		close(p.last.release)
	}
	p.last = nil
	it, ok := <-p.out
	if !ok {
		return nil, io.EOF
	}
	p.last = it
	return it.e, it.err
}

// Close implements Source: it stops the reading goroutine before closing
// the source it reads.
func (p *prefetchSource) Close() error {
	close(p.stop)
	<-p.done
	return p.src.Close()
}
