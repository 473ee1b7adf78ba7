package chunk

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// Writer writes logical ranges through a Map to every copy: both DUP
// stripes, every RAID1* mirror, both RAID10 sub-stripes, and for RAID5/6 the
// data column plus the row's recomputed P (and Q).
//
// Writes are never degraded: every device a write touches (for RAID5/6,
// every device of the affected rows, since parity needs all columns) must be
// present, or WriteLogical fails with ErrDeviceMissing before writing
// anything. Writing with a device missing would leave that device's copy or
// parity stale with nothing recording it; the kernel's degraded-write
// bookkeeping is not implemented.
//
// Nothing is atomic: on an I/O error some copies may hold the new bytes and
// others the old, and a RAID5/6 row may have data and parity disagreeing.
// The transaction layer's commit protocol (write new blocks, sync, then the
// superblock) is what makes a failed write harmless.
//
// A Writer is safe for concurrent use: the read-modify-write of RAID5/6 rows
// is serialised, so concurrent writes to different columns of one row do
// not lose each other's parity. Writes overlapping each other leave either
// one's bytes, unspecified which.
type Writer struct {
	m    *Map                           // Immutable.
	devs map[disk.DevID]blockdev.Device // Immutable; a missing device is absent.
	pool sync.Pool                      // *wscratch

	rowMu sync.Mutex // Serialises RAID5/6 read-modify-write.
}

// wscratch is per-call state reused through the Writer's pool: the current
// mapping and, once a RAID5/6 row has been written, three stripe-length
// buffers (P, Q and one column read back).
type wscratch struct {
	mp   Mapping
	bufs [][]byte
}

// buffers returns three length-n views (n <= stripeLen) of the
// scratch buffers; their contents are stale.
func (s *wscratch) buffers(n int) (p, q, tmp []byte) {
	if s.bufs == nil {
		s.bufs = make([][]byte, 3)
		for i := range s.bufs {
			s.bufs[i] = make([]byte, stripeLen)
		}
	}
	return s.bufs[0][:n], s.bufs[1][:n], s.bufs[2][:n]
}

// NewWriter returns a Writer over m. devs maps device ids to devices; a
// missing device is absent (or nil). The map is copied.
func NewWriter(m *Map, devs map[disk.DevID]blockdev.Device) *Writer {
	w := &Writer{m: m, devs: make(map[disk.DevID]blockdev.Device, len(devs))}
	for id, d := range devs {
		if d != nil {
			w.devs[id] = d
		}
	}
	return w
}

// Map returns the Map the Writer translates through.
func (w *Writer) Map() *Map { return w.m }

// WriteLogical writes p at logical addresses [logical, logical+len(p)) to
// every copy. The range may span stripe elements, rows and chunks. Before
// writing anything it maps the whole range and checks that every device
// needed is present: an unmapped range wraps ErrNotMapped (and
// disk.ErrCorrupt), a missing device wraps ErrDeviceMissing. RAID5/6 rows
// only partly covered are read back (the other data columns over the
// affected offsets) to recompute parity; a full-row write reads nothing.
// On a later error, some of the bytes may have been written.
func (w *Writer) WriteLogical(p []byte, logical disk.LogicalAddr) error {
	return w.writeLogical(p, logical, nil)
}

// WriteLogicalShared is WriteLogical of p, which are also the bytes of
// the host file range src: every copy of a mirrored or striped chunk
// (SINGLE, DUP, RAID0, RAID1*, RAID10) is stored with
// blockdev.WriteShared, so a device on the same host filesystem shares
// src's blocks instead of writing them. RAID5/6 rows are written (their
// parity has no host bytes to share).
func (w *Writer) WriteLogicalShared(p []byte, logical disk.LogicalAddr, src blockdev.HostRange) error {
	return w.writeLogical(p, logical, &src)
}

// writeLogical is WriteLogical, sharing with src when it is not nil.
func (w *Writer) writeLogical(p []byte, logical disk.LogicalAddr, src *blockdev.HostRange) error {
	if uint64(len(p)) > math.MaxUint64-uint64(logical) {
		return &disk.CorruptError{Logical: logical, What: fmt.Sprintf("write of %d bytes wraps the address space", len(p))}
	}
	s := w.getScratch()
	defer w.pool.Put(s)
	if err := w.checkDevices(len(p), logical, s); err != nil {
		return err
	}
	for done := 0; done < len(p); {
		l := logical + disk.LogicalAddr(done)
		c, err := w.m.Lookup(l)
		if err != nil {
			return err
		}
		var n int
		if c.profile.Parity() > 0 {
			n, err = w.writeRow(c, p[done:], l, s)
		} else {
			var at *blockdev.HostRange
			if src != nil {
				at = &blockdev.HostRange{File: src.File, Off: src.Off + int64(done)}
			}
			n, err = w.writeCopies(c, p[done:], l, s, at)
		}
		if err != nil {
			return err
		}
		done += n
	}
	return nil
}

// checkDevices maps [logical, logical+n) piece by piece and fails if a
// chunk is missing or a device the pieces (and, for RAID5/6, their rows'
// other columns and parity) live on is absent.
func (w *Writer) checkDevices(n int, logical disk.LogicalAddr, s *wscratch) error {
	for done := 0; done < n; {
		l := logical + disk.LogicalAddr(done)
		c, err := w.m.Lookup(l)
		if err != nil {
			return err
		}
		c.MapRange(l, uint64(n-done), &s.mp)
		for _, locs := range [][]Location{s.mp.Copies, s.mp.Data, {s.mp.P, s.mp.Q}} {
			for _, loc := range locs {
				if loc.Stripe < 0 {
					continue
				}
				if _, ok := w.devs[loc.DevID]; !ok {
					return fmt.Errorf("write logical %d (%d bytes) of %s: devid %d: %w",
						l, s.mp.Length, c, loc.DevID, ErrDeviceMissing)
				}
			}
		}
		done += int(s.mp.Length)
	}
	return nil
}

// writeCopies writes the first piece of p (cut at the stripe element and
// chunk end) to every copy of a non-parity chunk, shared with the host
// file range src when it is not nil; it returns the piece size.
func (w *Writer) writeCopies(c *Chunk, p []byte, logical disk.LogicalAddr, s *wscratch, src *blockdev.HostRange) (int, error) {
	c.MapRange(logical, uint64(len(p)), &s.mp)
	piece := p[:s.mp.Length]
	for _, loc := range s.mp.Copies {
		var err error
		if src != nil {
			err = w.writeShared(loc, piece, logical, *src)
		} else {
			err = w.writeAt(loc, piece, logical)
		}
		if err != nil {
			return 0, err
		}
	}
	return len(piece), nil
}

// writeShared is writeAt through blockdev.WriteShared.
func (w *Writer) writeShared(loc Location, b []byte, logical disk.LogicalAddr, src blockdev.HostRange) error {
	d, ok := w.devs[loc.DevID]
	if !ok {
		return fmt.Errorf("write logical %d: devid %d: %w", logical, loc.DevID, ErrDeviceMissing)
	}
	if _, err := blockdev.WriteShared(d, b, int64(loc.Physical), src); err != nil {
		return fmt.Errorf("write logical %d (%d bytes) to %s: %w", logical, len(b), loc, err)
	}
	return nil
}

// writeRow writes the part of p that falls in one RAID5/6 row, starting at
// logical, and returns its size. The row is cut into at most three
// segments of in-element offsets [x, y) over which the set of columns
// written is the same (the cuts are where the write starts and ends inside
// its first and last element); each segment is written with its parity.
func (w *Writer) writeRow(c *Chunk, p []byte, logical disk.LogicalAddr, s *wscratch) (int, error) {
	rowLen := uint64(c.data) * stripeLen
	off := uint64(logical - c.logical)
	rowStart := off - off%rowLen
	s0 := off - rowStart
	e0 := min(s0+uint64(len(p)), rowLen, c.item.Length-rowStart)
	cuts := [4]uint64{0, s0 % stripeLen, e0 % stripeLen, stripeLen}
	slices.Sort(cuts[:])
	w.rowMu.Lock()
	defer w.rowMu.Unlock()
	for i := 0; i+1 < len(cuts); i++ {
		if cuts[i] == cuts[i+1] {
			continue
		}
		seg := rowSegment{c: c, p: p[:e0-s0], rowStart: rowStart, s0: s0, e0: e0, x: cuts[i], y: cuts[i+1]}
		if err := w.writeSegment(&seg, s); err != nil {
			return 0, err
		}
	}
	return int(e0 - s0), nil
}

// rowSegment is the in-element offset range [x, y) of one RAID5/6 row,
// whose row-relative logical range [rowStart, ...) receives p over the
// row-relative range [s0, e0).
type rowSegment struct {
	c        *Chunk
	p        []byte
	rowStart uint64 // chunk-relative logical offset of the row
	s0, e0   uint64 // row-relative range written; len(p) == e0-s0
	x, y     uint64 // in-element offsets of the segment
}

// column returns the bytes of column j for the segment if the write covers
// them, else nil. Segment cuts guarantee a column is covered whole or not
// at all.
func (g *rowSegment) column(j int) []byte {
	lo := uint64(j)*stripeLen + g.x
	if lo < g.s0 || lo+(g.y-g.x) > g.e0 {
		return nil
	}
	return g.p[lo-g.s0 : lo-g.s0+(g.y-g.x)]
}

// writeSegment recomputes the parity of one segment from the new bytes and
// the other columns read back, then writes the new data and the parity.
// P and Q accumulate column by column (Q by Horner's rule from the last
// column down, as Parity does), so memory stays at three buffers whatever
// the stripe count.
func (w *Writer) writeSegment(g *rowSegment, s *wscratch) error {
	d := g.c.data
	written := false
	for j := range d {
		if g.column(j) != nil {
			written = true
			break
		}
	}
	if !written {
		return nil // beyond the chunk end, or between the write's ends
	}
	n := int(g.y - g.x)
	// Column 0 at offset x: its mapping lists every column, P and Q at x.
	colStart := g.c.logical + disk.LogicalAddr(g.rowStart+g.x)
	g.c.MapRange(colStart, uint64(n), &s.mp)
	raid6 := g.c.profile == RAID6
	pbuf, qbuf, tmp := s.buffers(n)
	clear(pbuf)
	clear(qbuf)
	for j := d - 1; j >= 0; j-- {
		col := g.column(j)
		if col == nil {
			if err := w.readAt(s.mp.Data[j], tmp); err != nil {
				return fmt.Errorf("write logical %d: reading back data column %d of row %d for parity: %w",
					colStart+disk.LogicalAddr(uint64(j)*stripeLen), j, s.mp.Row, err)
			}
			col = tmp
		}
		xorInto(pbuf, col)
		if raid6 {
			mul2Xor(qbuf, col)
		}
	}
	for j := range d {
		if col := g.column(j); col != nil {
			if err := w.writeAt(s.mp.Data[j], col, colStart+disk.LogicalAddr(uint64(j)*stripeLen)); err != nil {
				return err
			}
		}
	}
	if err := w.writeAt(s.mp.P, pbuf, colStart); err != nil {
		return err
	}
	if raid6 {
		return w.writeAt(s.mp.Q, qbuf, colStart)
	}
	return nil
}

// writeAt writes b to one location; logical is only for the error.
func (w *Writer) writeAt(loc Location, b []byte, logical disk.LogicalAddr) error {
	d, ok := w.devs[loc.DevID]
	if !ok {
		return fmt.Errorf("write logical %d: devid %d: %w", logical, loc.DevID, ErrDeviceMissing)
	}
	n, err := d.WriteAt(b, int64(loc.Physical))
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
	}
	if err != nil {
		return fmt.Errorf("write logical %d (%d bytes) to %s: %w", logical, len(b), loc, err)
	}
	return nil
}

// readAt reads one location in full for a parity update.
func (w *Writer) readAt(loc Location, b []byte) error {
	d, ok := w.devs[loc.DevID]
	if !ok {
		return fmt.Errorf("devid %d: %w", loc.DevID, ErrDeviceMissing)
	}
	n, err := d.ReadAt(b, int64(loc.Physical))
	if n == len(b) {
		return nil
	}
	if err == nil {
		err = errors.New("short read")
	}
	return fmt.Errorf("%s: read %d of %d bytes: %w", loc, n, len(b), err)
}

// Sync flushes every device, in devid order, so that everything written
// before it is durable. It tries every device and returns all failures.
func (w *Writer) Sync() error {
	ids := make([]disk.DevID, 0, len(w.devs))
	for id := range w.devs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var errs []error
	for _, id := range ids {
		if err := w.devs[id].Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sync devid %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (w *Writer) getScratch() *wscratch {
	if s, ok := w.pool.Get().(*wscratch); ok {
		return s
	}
	return new(wscratch)
}
