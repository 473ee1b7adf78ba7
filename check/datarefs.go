package check

import (
	"encoding/binary"
	"slices"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Data references (file extents pointing at data extents) are streamed,
// not kept (docs/design/0024-check-memory.md): the walk adds one record
// per reference to a sorter, keyed by (bytenr, walk order), and the
// extent-tree pass and the quota pass each read them back as groups, one
// per data extent, in bytenr order.

// dataRefRecLen is one record: bytenr, sequence, disk length, the tree
// walked, the key's inode and offset, then the dataRef's root, offset and
// leaf.
const dataRefRecLen = 9 * 8

func (c *checker) addDataRef(bytenr disk.LogicalAddr, diskLen uint64, tree disk.ObjectID, k disk.Key, r dataRef) {
	var b [dataRefRecLen]byte
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(bytenr))
	be.PutUint64(b[8:], c.dataSeq)
	c.dataSeq++
	be.PutUint64(b[16:], diskLen)
	be.PutUint64(b[24:], uint64(tree))
	be.PutUint64(b[32:], uint64(k.ObjectID))
	be.PutUint64(b[40:], k.Offset)
	be.PutUint64(b[48:], uint64(r.root))
	be.PutUint64(b[56:], r.off)
	be.PutUint64(b[64:], uint64(r.leaf))
	c.dataRefs.Add(b[:])
}

// dataGroup is every reference to one data extent, in walk order.
type dataGroup struct {
	bytenr disk.LogicalAddr
	rec    dataRec
}

// dataCursor reads the data references back, one data extent at a time.
type dataCursor struct {
	c *checker
	// report: the first reference's length is the extent's; others that
	// disagree are problems (reported on the first pass only).
	report bool
	it     *mergeIter
	next   []byte // read ahead: the first record of the next group
	done   bool
}

func (c *checker) newDataCursor(report bool) *dataCursor {
	d := &dataCursor{c: c, report: report, it: c.dataRefs.Merge()}
	d.next, d.done = d.it.Next()
	d.done = !d.done
	return d
}

// group returns the next data extent's references, or false at the end.
func (d *dataCursor) group() (dataGroup, bool) {
	if d.done {
		return dataGroup{}, false
	}
	be := binary.BigEndian
	g := dataGroup{bytenr: disk.LogicalAddr(be.Uint64(d.next))}
	g.rec.diskLen = be.Uint64(d.next[16:])
	for !d.done && disk.LogicalAddr(be.Uint64(d.next)) == g.bytenr {
		b := d.next
		r := dataRef{root: disk.ObjectID(be.Uint64(b[48:])), ino: disk.ObjectID(be.Uint64(b[32:])), off: be.Uint64(b[56:]), leaf: disk.LogicalAddr(be.Uint64(b[64:]))}
		if l := be.Uint64(b[16:]); l != g.rec.diskLen && d.report {
			tree := disk.ObjectID(be.Uint64(b[24:]))
			k := disk.Key{ObjectID: r.ino, Type: disk.ExtentDataKey, Offset: be.Uint64(b[40:])}
			d.c.problemf(KindExtentRef, tree, g.bytenr, &k, "file extent [%d %d] of root %d inode %d offset %d disagrees with other references' length %d",
				g.bytenr, l, tree, k.ObjectID, k.Offset, g.rec.diskLen)
		}
		g.rec.refs = append(g.rec.refs, r)
		var ok bool
		d.next, ok = d.it.Next()
		d.done = !ok
	}
	return g, true
}

// Err is the first I/O error of the spilled runs.
func (d *dataCursor) Err() error { return d.it.Err() }

// dataJoin hands the extent-tree pass the references of each data extent
// item, in bytenr order, and keeps the groups no extent item claimed.
type dataJoin struct {
	cur       *dataCursor
	pending   *dataGroup // read ahead, not yet reached
	last      *dataGroup // the group claimed last (an item repeated)
	unbacked  []dataGroup
	more      int // unbacked groups beyond the cap
	prev      disk.LogicalAddr
	restarted bool
}

// at returns the references of the data extent at start (nil when none),
// and records every group below start as unbacked. Extent items come in
// bytenr order; a damaged tree that goes back restarts the stream.
func (j *dataJoin) at(c *checker, start disk.LogicalAddr) *dataRec {
	if j.last != nil && j.last.bytenr == start {
		return &j.last.rec
	}
	if start < j.prev {
		j.restart(c)
	}
	j.prev = start
	for {
		if j.pending == nil {
			g, ok := j.cur.group()
			if !ok {
				return nil
			}
			j.pending = &g
		}
		switch g := j.pending; {
		case g.bytenr < start:
			j.keep(*g)
			j.pending = nil
		case g.bytenr == start:
			j.last, j.pending = g, nil
			if j.restarted {
				j.claim(start)
			}
			return &g.rec
		default:
			return nil
		}
	}
}

func (j *dataJoin) keep(g dataGroup) {
	if len(j.unbacked) < maxProblems {
		j.unbacked = append(j.unbacked, g)
	} else {
		j.more++
	}
}

// claim drops start from the unbacked groups (met again after a restart).
func (j *dataJoin) claim(start disk.LogicalAddr) {
	j.unbacked = slices.DeleteFunc(j.unbacked, func(g dataGroup) bool { return g.bytenr == start })
}

func (j *dataJoin) restart(c *checker) {
	j.cur = c.newDataCursor(false)
	j.pending, j.last, j.restarted = nil, nil, true
}

// finish reads the groups past the last extent item: all unbacked.
func (j *dataJoin) finish() error {
	if j.pending != nil {
		j.keep(*j.pending)
		j.pending = nil
	}
	for {
		g, ok := j.cur.group()
		if !ok {
			break
		}
		j.keep(g)
	}
	return j.cur.Err()
}
