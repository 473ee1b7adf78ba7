package chunk

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// ErrDeviceMissing is wrapped by the error of an attempt that needed a
// device the Reader was not given.
var ErrDeviceMissing = errors.New("device missing")

// ErrVerify is wrapped (with disk.ErrCorrupt) by the error of a copy that
// was read but failed the caller's verification.
var ErrVerify = errors.New("copy failed verification")

// VerifyFunc judges bytes read for the logical range starting at logical:
// true means they are good (checksums match). ReadLogical calls it once per
// piece (a stripe element, or up to the chunk end for mirrored profiles)
// and, when a piece fails whole, again for each sector of it; so b may be
// any sector-aligned part of the request. A check that needs the whole
// buffer, like a tree block's, belongs with ReadBlock, which never splits.
type VerifyFunc func(logical disk.LogicalAddr, b []byte) bool

// Reader reads logical ranges through a Map from a set of devices, trying
// mirrors and rebuilding from parity when a copy is missing, unreadable or
// rejected by the caller's verification. It is safe for concurrent use.
type Reader struct {
	m          *Map                           // Immutable.
	devs       map[disk.DevID]blockdev.Device // Immutable; a missing device is absent.
	sectorSize int                            // Immutable; granularity of mirror retries.
	pool       sync.Pool                      // *scratch
}

// NewReader returns a Reader over m. devs maps device ids to devices; a
// missing device is simply absent (or nil). The map is copied.
func NewReader(m *Map, devs map[disk.DevID]blockdev.Device) *Reader {
	r := &Reader{m: m, devs: make(map[disk.DevID]blockdev.Device, len(devs)), sectorSize: int(m.sectorSize)}
	for id, d := range devs {
		if d != nil {
			r.devs[id] = d
		}
	}
	if r.sectorSize <= 0 || r.sectorSize > stripeLen {
		r.sectorSize = 4096
	}
	return r
}

// Map returns the Map the Reader translates through.
func (r *Reader) Map() *Map { return r.m }

// Attempt is one failed way of getting a piece: a copy that could not be
// read or failed verification, or a parity rebuild whose result failed.
type Attempt struct {
	Location       // the copy read (for a rebuild: the column rebuilt)
	Rebuild  bool  // the attempt rebuilt the data from parity
	Lost     []int // for a rebuild: stripe indexes treated as lost
	Err      error // why it failed
}

// String describes the attempt for error messages.
func (a Attempt) String() string {
	if a.Rebuild {
		return fmt.Sprintf("rebuild of %s from parity, stripes %v lost: %v", a.Location, a.Lost, a.Err)
	}
	return fmt.Sprintf("%s: %v", a.Location, a.Err)
}

// Piece reports how one piece of a read was obtained (see ReadLogicalTrace).
type Piece struct {
	Logical disk.LogicalAddr
	Length  int
	// Mirror numbers the way the data came, as the kernel's mirror_num: for
	// mirrored profiles i+1 for Copies[i]; for RAID5/6 1 = the data column
	// itself, 2 = rebuilt from P, 3 = rebuilt from Q, 4 and up = rebuilt
	// from P and Q assuming a second lost column.
	Mirror  int
	From    Location // the copy used; for a rebuild, the column rebuilt
	Rebuilt bool
	Lost    []int     // for a rebuild: stripe indexes treated as lost
	Failed  []Attempt // what failed before this succeeded
}

// ReadError is returned when every copy of a piece failed. It names the
// logical range and each device and offset tried.
type ReadError struct {
	Logical  disk.LogicalAddr
	Length   int
	Attempts []Attempt
}

// Error implements error.
func (e *ReadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "read logical %d (%d bytes): every copy failed", e.Logical, e.Length)
	for _, a := range e.Attempts {
		b.WriteString("; ")
		b.WriteString(a.String())
	}
	return b.String()
}

// Unwrap returns the error of every attempt, so errors.Is finds
// disk.ErrCorrupt (a copy failed verification or a device is truncated),
// ErrDeviceMissing, or an I/O error.
func (e *ReadError) Unwrap() []error {
	out := make([]error, 0, len(e.Attempts))
	for _, a := range e.Attempts {
		out = append(out, a.Err)
	}
	return out
}

// ReadLogical fills p with the bytes at logical addresses [logical,
// logical+len(p)). The range is cut into pieces at stripe-element and chunk
// boundaries; each piece is read from its first copy and passed to verify
// (nil accepts everything). On an I/O error, a missing device or a failed
// verification the next copy is tried; RAID5/6 data is rebuilt from parity
// (one lost column for RAID5, up to two for RAID6). When every way of
// reading a piece fails, it is retried sector by sector, so sectors bad on
// different mirrors or columns are still read. The error of an unmapped range
// wraps ErrNotMapped; when every copy fails it is a *ReadError.
func (r *Reader) ReadLogical(p []byte, logical disk.LogicalAddr, verify VerifyFunc) error {
	return r.ReadLogicalTrace(p, logical, verify, nil)
}

// ReadLogicalTrace is ReadLogical that also reports, through trace (if not
// nil), how each piece was obtained: which copy, whether it was rebuilt,
// and what failed first. Read-repair and tests use it.
func (r *Reader) ReadLogicalTrace(p []byte, logical disk.LogicalAddr, verify VerifyFunc, trace func(Piece)) error {
	if uint64(len(p)) > math.MaxUint64-uint64(logical) {
		return &disk.CorruptError{Logical: logical, What: fmt.Sprintf("read of %d bytes wraps the address space", len(p))}
	}
	s := r.getScratch()
	defer r.pool.Put(s)
	for done := 0; done < len(p); {
		l := logical + disk.LogicalAddr(done)
		c, err := r.m.Lookup(l)
		if err != nil {
			return err
		}
		c.MapRange(l, uint64(len(p)-done), &s.mp)
		piece := p[done : done+int(s.mp.Length)]
		if err := r.readPiece(piece, &s.mp, verify, trace, s, true); err != nil {
			return err
		}
		done += len(piece)
	}
	return nil
}

// ReadBlock reads one block, such as a tree block, that verify must judge
// as a whole: the range must lie within one stripe element (a nodesize-
// aligned tree block always does), else the error wraps disk.ErrCorrupt.
// Mirrors and parity are used as in ReadLogical.
func (r *Reader) ReadBlock(p []byte, logical disk.LogicalAddr, verify func(b []byte) bool) error {
	c, err := r.m.Lookup(logical)
	if err != nil {
		return err
	}
	s := r.getScratch()
	defer r.pool.Put(s)
	c.MapRange(logical, uint64(len(p)), &s.mp)
	if s.mp.Length != uint64(len(p)) {
		return &disk.CorruptError{Logical: logical, What: fmt.Sprintf("block of %d bytes crosses a stripe boundary of %s", len(p), c)}
	}
	var v VerifyFunc
	if verify != nil {
		v = func(_ disk.LogicalAddr, b []byte) bool { return verify(b) }
	}
	return r.readPiece(p, &s.mp, v, nil, s, false)
}

// readPiece reads one mapped piece into buf. If every way of reading the
// piece whole fails and split is set, it retries sector by sector, so that
// damage spread over several copies or columns at different offsets is
// still survivable, as the kernel's per-sector repair makes it.
func (r *Reader) readPiece(buf []byte, mp *Mapping, verify VerifyFunc, trace func(Piece), s *scratch, split bool) error {
	err := r.readWhole(buf, mp, verify, trace, s)
	if err == nil || !split || len(buf) <= r.sectorSize || onlyMissing(err) {
		return err
	}
	return r.readSectors(buf, mp, verify, trace, s)
}

// readWhole reads one piece without splitting it.
func (r *Reader) readWhole(buf []byte, mp *Mapping, verify VerifyFunc, trace func(Piece), s *scratch) error {
	if mp.Chunk.profile.Parity() > 0 {
		return r.readParity(buf, mp, verify, trace, s)
	}
	failed, err := r.readCopies(buf, mp.Logical, mp.Copies, verify, trace, nil)
	if err != nil {
		return &ReadError{Logical: mp.Logical, Length: len(buf), Attempts: failed}
	}
	return nil
}

// onlyMissing reports whether every attempt failed for lack of a device,
// in which case smaller reads cannot do better.
func onlyMissing(err error) bool {
	var re *ReadError
	if !errors.As(err, &re) {
		return false
	}
	for _, a := range re.Attempts {
		if !errors.Is(a.Err, ErrDeviceMissing) && !errors.Is(a.Err, errTooManyLost) {
			return false
		}
	}
	return true
}

// readCopies tries each copy in order. It returns the failed attempts
// (appended to failed) and nil once a copy is read and verified.
func (r *Reader) readCopies(buf []byte, logical disk.LogicalAddr, copies []Location, verify VerifyFunc,
	trace func(Piece), failed []Attempt) ([]Attempt, error) {
	for i, loc := range copies {
		err := r.readAt(loc, buf)
		if err == nil && verify != nil && !verify(logical, buf) {
			err = verifyError(logical, loc)
		}
		if err == nil {
			if trace != nil {
				trace(Piece{Logical: logical, Length: len(buf), Mirror: i + 1, From: loc, Failed: failed})
			}
			return failed, nil
		}
		failed = append(failed, Attempt{Location: loc, Err: err})
	}
	return failed, errors.New("all copies failed")
}

// readSectors reads a piece one sector at a time, each sector trying every
// copy (or parity rebuild) on its own.
func (r *Reader) readSectors(buf []byte, mp *Mapping, verify VerifyFunc, trace func(Piece), s *scratch) error {
	var sub Mapping
	for done := 0; done < len(buf); {
		l := mp.Logical + disk.LogicalAddr(done)
		n := min(len(buf)-done, r.sectorSize-int(uint64(l)%uint64(r.sectorSize)))
		mp.Chunk.MapRange(l, uint64(n), &sub)
		if err := r.readWhole(buf[done:done+n], &sub, verify, trace, s); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// readAt reads one copy in full. A short read is a truncated device.
func (r *Reader) readAt(loc Location, b []byte) error {
	d, ok := r.devs[loc.DevID]
	if !ok {
		return fmt.Errorf("devid %d: %w", loc.DevID, ErrDeviceMissing)
	}
	n, err := d.ReadAt(b, int64(loc.Physical))
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &disk.CorruptError{Physical: loc.Physical,
			What: fmt.Sprintf("devid %d truncated: read %d of %d bytes (device size %d)", loc.DevID, n, len(b), d.Size())}
	}
	return err
}

// verifyError is the error of a copy rejected by the caller.
func verifyError(logical disk.LogicalAddr, loc Location) error {
	return &disk.CorruptError{Logical: logical, Physical: loc.Physical,
		What: fmt.Sprintf("devid %d copy", loc.DevID), Err: ErrVerify}
}

// scratch holds per-call state reused through the Reader's pool: the
// mapping of the current piece and, once a rebuild has been needed, four
// stripe-length buffers.
type scratch struct {
	mp   Mapping
	bufs [][]byte
}

func (r *Reader) getScratch() *scratch {
	if s, ok := r.pool.Get().(*scratch); ok {
		return s
	}
	return new(scratch)
}

// buffers returns four buffers of n <= stripeLen bytes.
func (s *scratch) buffers(n int) (a, b, c, d []byte) {
	if s.bufs == nil {
		s.bufs = make([][]byte, 4)
		for i := range s.bufs {
			s.bufs[i] = make([]byte, stripeLen)
		}
	}
	return s.bufs[0][:n], s.bufs[1][:n], s.bufs[2][:n], s.bufs[3][:n]
}
