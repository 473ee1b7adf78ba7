//go:build linux

package blockdev

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// directIO writes large aligned pieces with O_DIRECT, bypassing the page
// cache, through a second descriptor of the same open file. Writing
// gigabytes of file data through the page cache costs a copy into newly
// allocated cache pages and then the writeback of every page; O_DIRECT
// hands the bytes to the device once. Linux keeps the two descriptors
// coherent: a direct write first writes back dirty cached pages of its
// range and drops cached pages of it afterwards, and fsync of either
// descriptor flushes the device's cache for both.
//
// The bytes are copied into page-aligned bounce buffers (anonymous
// mappings), because O_DIRECT wants aligned memory and Go gives no such
// guarantee for a slice. Where the system refuses to open the file with
// O_DIRECT, or a direct write fails with EINVAL before writing anything
// (alignment the filesystem does not take), direct writes are switched
// off and every write is buffered from then on. (tmpfs takes O_DIRECT
// since Linux 6.6.)
type directIO struct {
	mu       sync.Mutex
	opened   bool
	disabled bool
	f        *os.File // nil: not available; kept open until close
	free     [][]byte // bounce buffers not in use
	all      [][]byte // every bounce buffer, unmapped by close
	writes   int      // direct writes done, for tests
}

// writeAt writes p at off of the file src with O_DIRECT, when it can.
// handled is false when the write did not start and must be made
// buffered.
func (d *directIO) writeAt(src *os.File, p []byte, off int64) (handled bool, n int, err error) {
	if len(p) < directMin || off%directAlign != 0 || len(p)%directAlign != 0 {
		return false, 0, nil
	}
	f, buf := d.acquire(src)
	if f == nil {
		return false, 0, nil
	}
	defer d.release(buf)
	for n < len(p) {
		k := min(len(p)-n, len(buf))
		copy(buf, p[n:n+k])
		w, err := f.WriteAt(buf[:k], off+int64(n))
		if err != nil {
			if n == 0 && w == 0 && errors.Is(err, syscall.EINVAL) {
				d.disable()
				return false, 0, nil
			}
			return true, n + w, err
		}
		n += k
	}
	d.mu.Lock()
	d.writes++
	d.mu.Unlock()
	return true, n, nil
}

// acquire opens the direct descriptor on first use and returns it with a
// bounce buffer, or nil when direct writes are not available.
func (d *directIO) acquire(src *os.File) (*os.File, []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.opened {
		d.opened = true
		// /proc/self/fd reopens the very file src has open, even if its
		// path was renamed or removed since.
		f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", src.Fd()), os.O_WRONLY|unix.O_DIRECT, 0)
		if err == nil {
			d.f = f
		}
	}
	if d.f == nil || d.disabled {
		return nil, nil
	}
	if n := len(d.free); n > 0 {
		b := d.free[n-1]
		d.free = d.free[:n-1]
		return d.f, b
	}
	b, err := unix.Mmap(-1, 0, directChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil
	}
	d.all = append(d.all, b)
	return d.f, b
}

// release gives a bounce buffer back.
func (d *directIO) release(b []byte) {
	d.mu.Lock()
	d.free = append(d.free, b)
	d.mu.Unlock()
}

// disable switches direct writes off for good. The descriptor stays open
// until close: another goroutine may be writing through it.
func (d *directIO) disable() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disabled = true
}

// count returns the number of direct writes made.
func (d *directIO) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes
}

// close releases the descriptor and the buffers; no write may run.
func (d *directIO) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var err error
	if d.f != nil {
		err = d.f.Close()
		d.f = nil
	}
	for _, b := range d.all {
		if e := unix.Munmap(b); e != nil && err == nil {
			err = e
		}
	}
	d.all, d.free = nil, nil
	return err
}
