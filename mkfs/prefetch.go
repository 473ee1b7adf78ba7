package mkfs

import (
	"bytes"
	"io"
	"runtime"
	"sync"

	"github.com/gobtrfs/btrfs"
)

// prefetchMax is the largest file whose data the prefetcher reads ahead
// into memory; larger files are streamed by the writer as they come.
const prefetchMax = 256 << 10

// minSectorSize is the smallest sector size (and host block size) there
// is: a file shorter than it has no whole sector to share with the host.
const minSectorSize = 4096

// prefetchDepth is how many entries the prefetcher may run ahead: at most
// prefetchDepth*prefetchMax bytes of file data are held.
const prefetchDepth = 128

// prefetchItem is one entry handed from the reading goroutine to Next.
type prefetchItem struct {
	e       *Entry
	err     error
	release chan struct{} // non-nil: the reader waits for it before its next Next
	ready   chan struct{} // non-nil: closed when e.prepared is set (or given up)
	data    []byte        // the data read ahead, for the preparing worker
}

// prepareFunc compresses and checksums a new file's data ahead of its
// write (btrfs.FS.PrepareData).
type prepareFunc func([]byte) (*btrfs.PreparedData, error)

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

	// With prepare set, workers compress and checksum the data read
	// ahead (jobs), so that work uses every core while entries are
	// applied one at a time.
	prepare prepareFunc
	jobs    chan *prefetchItem
	workers sync.WaitGroup

	// keepHost leaves the data of files with a host file (Entry.host) of
	// a sector or more to the writer, which shares them with the image
	// (BuildOptions.Reflink): the host file must be open when it writes.
	keepHost bool
}

// newPrefetch starts reading src ahead, and preparing the data of small
// files with prepare when it is not nil. With keepHost, files the writer
// will share with the host are not read ahead.
func newPrefetch(src Source, prepare prepareFunc, keepHost bool) *prefetchSource {
	p := &prefetchSource{src: src, out: make(chan *prefetchItem, prefetchDepth),
		stop: make(chan struct{}), done: make(chan struct{}), prepare: prepare, keepHost: keepHost}
	if prepare != nil {
		p.jobs = make(chan *prefetchItem, prefetchDepth)
		for range runtime.GOMAXPROCS(0) {
			p.workers.Go(p.work)
		}
	}
	go p.run()
	return p
}

// work prepares the data of the items in jobs until it closes.
func (p *prefetchSource) work() {
	for it := range p.jobs {
		select {
		case <-p.stop:
		default:
			if pd, err := p.prepare(it.data); err == nil {
				it.e.prepared = pd // else the writer prepares it and reports
			}
		}
		it.data = nil
		close(it.ready)
	}
}

// run is the reading goroutine.
func (p *prefetchSource) run() {
	defer close(p.done)
	defer close(p.out)
	if p.jobs != nil {
		defer close(p.jobs)
	}
	for {
		e, err := p.src.Next()
		it := &prefetchItem{e: e, err: err}
		if err == nil && e.Open != nil {
			if n := e.DataBytes(); n <= prefetchMax && !(p.keepHost && e.host != nil && n >= minSectorSize) {
				data, ok := readAhead(e, n)
				if ok && p.jobs != nil && len(e.Segments) == 1 && e.Segments[0].Off == 0 && int64(len(data)) == n {
					it.data, it.ready = data, make(chan struct{})
				}
			} else {
				it.release = make(chan struct{})
			}
		}
		if it.ready != nil {
			select {
			case p.jobs <- it:
			case <-p.stop:
				return
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
// that serves them from memory (or reports the read's error). It returns
// the data and whether they were read without error.
func readAhead(e *Entry, n int64) ([]byte, bool) {
	open := e.Open
	e.host = nil // the source closes it at its next Next: the data come from memory now
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
	return data, err == nil
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
	if it.ready != nil {
		<-it.ready
	}
	return it.e, it.err
}

// Close implements Source: it stops the reading goroutine before closing
// the source it reads.
func (p *prefetchSource) Close() error {
	close(p.stop)
	<-p.done
	p.workers.Wait()
	return p.src.Close()
}
