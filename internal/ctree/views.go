package ctree

import (
	"slices"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Published views of a running transaction (docs/design/0009, "Reads that
// never stop").
//
// A reader outside the transaction may want the trees as they were at some
// moment between two whole changes, and keep reading that state while
// later changes run. Publish marks such a moment: it returns an epoch v,
// and ReadAt(addr, v) then returns the block at addr as it was when Publish
// ran, for as long as the caller says (through the live epochs it passes
// to Trim) that a reader of v may still come.
//
// The cost falls on the first change of a block after a publication, and
// only for blocks that existed then (copy on first write per epoch):
//
//   - Every private block records the epoch its bytes belong to (ep). The
//     changes after publication v write in epoch v+1 (wep). A view of v
//     reads, per block, the newest version with ep <= v.
//   - The first write lock of a block whose ep is older than wep keeps its
//     bytes as they are for the views and gives the block a copy to change
//     (keepForViews). Blocks made after the publication are of the new
//     epoch already: never copied, and invisible to the older views.
//   - A private block freed while a published view may reach it is kept
//     (keepGone), since its address may be handed out again at once.
//   - Trim drops every kept version no live view can read: a version kept
//     at epoch t (covering views from its ep to t) is filed under the
//     newest live view in that range, and looked at again only when that
//     view is gone. Nothing is scanned that no view pins.
//
// Publication itself costs O(1). While no view is live (Trim was told of
// none since the last Publish), blocks are changed in place and nothing is
// copied; a transaction that is never published (the transaction layer
// used alone, mkfs) pays two atomic loads per write lock.

// pinned is a kept version: block b's version of epoch ep.
type pinned struct {
	b  *block
	ep uint64
}

// goneBlock is a private block freed while views of it could be live:
// views older than freedAt still read it at its address.
type goneBlock struct {
	b       *block
	freedAt uint64
}

// Publish marks the transaction's trees as they are now as epoch v for
// ReadAt; the changes after it write in the next epoch. Preconditions: no
// tree operation runs concurrently.
func (tx *Trans) Publish() (v uint64) {
	v = tx.wep.Add(1) - 1
	tx.liveTop.Store(v + 1)
	return v
}

// KeptVersions returns the number of block versions kept for views
// besides the blocks' current bytes, and the number of blocks copied for
// views so far (for tests and measurements).
func (tx *Trans) KeptVersions() (now, copies int64) { return tx.nvers.Load(), tx.copies.Load() }

// keepForViews leaves b's bytes to the views published since they were
// written and gives b a copy of them, of epoch e, to change. Called with
// b's write lock held, at the first write lock of an epoch.
func (tx *Trans) keepForViews(b *block, e uint64) {
	old := b.ep
	chain := *b.vers.Load()
	nb := append([]byte(nil), b.buf...)
	nc := make([]bufVersion, len(chain), len(chain)+1)
	copy(nc, chain)
	nc = append(nc, bufVersion{ep: e, buf: nb})
	b.buf, b.ep = nb, e
	b.vers.Store(&nc)
	tx.nvers.Add(1)
	tx.copies.Add(1)
	tx.pin(pinned{b: b, ep: old}, e-1)
}

// keepGone keeps a freed private block for the views that may still reach
// it. Called with tx.mu held, the block about to leave the table.
func (tx *Trans) keepGone(b *block) {
	e := tx.wep.Load()
	if e == 0 {
		return
	}
	chain := *b.vers.Load()
	last := chain[len(chain)-1]
	if last.ep < e && last.ep < tx.liveTop.Load() {
		// Its bytes now are what the views since last.ep read.
		tx.nvers.Add(1)
		tx.pin(pinned{b: b, ep: last.ep}, e-1)
	} else {
		// No live view reads its bytes now: only its kept versions, if
		// any, are still read.
		chain = slices.Clone(chain[:len(chain)-1])
		b.vers.Store(&chain)
	}
	if len(chain) == 0 {
		return
	}
	if tx.gone == nil {
		tx.gone = map[disk.LogicalAddr][]goneBlock{}
	}
	tx.gone[b.addr] = append(tx.gone[b.addr], goneBlock{b: b, freedAt: e})
}

func (tx *Trans) pin(p pinned, at uint64) {
	tx.vmu.Lock()
	if tx.pins == nil {
		tx.pins = map[uint64][]pinned{}
	}
	tx.pins[at] = append(tx.pins[at], p)
	tx.vmu.Unlock()
}

// Trim drops the kept versions that no view of an epoch in live (sorted,
// ascending: the views still in use, and the newest publication, which a
// reader may still take) can read. Preconditions: no tree operation runs
// concurrently.
func (tx *Trans) Trim(live []uint64) {
	tx.vmu.Lock()
	defer tx.vmu.Unlock()
	if len(live) == 0 {
		tx.liveTop.Store(0)
	} else {
		tx.liveTop.Store(live[len(live)-1] + 1)
	}
	for at, list := range tx.pins {
		if _, ok := slices.BinarySearch(live, at); ok {
			continue
		}
		delete(tx.pins, at)
		for _, p := range list {
			// The version serves views from p.ep to at or later; views
			// after at up to its end were already gone when it was filed.
			i, _ := slices.BinarySearch(live, at) // first live > at
			if i > 0 && live[i-1] >= p.ep {
				u := live[i-1]
				tx.pins[u] = append(tx.pins[u], p)
				continue
			}
			tx.dropVersion(p)
		}
	}
}

// dropVersion removes p's version from its block's chain; a freed block
// left without versions leaves the gone table.
func (tx *Trans) dropVersion(p pinned) {
	tx.nvers.Add(-1)
	chain := *p.b.vers.Load()
	nc := make([]bufVersion, 0, len(chain))
	for _, v := range chain {
		if v.ep != p.ep {
			nc = append(nc, v)
		}
	}
	p.b.vers.Store(&nc)
	if len(nc) > 0 {
		return
	}
	tx.mu.Lock()
	gs := tx.gone[p.b.addr]
	gs = slices.DeleteFunc(slices.Clone(gs), func(g goneBlock) bool { return g.b == p.b })
	if len(gs) == 0 {
		delete(tx.gone, p.b.addr)
	} else {
		tx.gone[p.b.addr] = gs
	}
	tx.mu.Unlock()
}

// ReadAt returns the private block at addr as it was at publication v,
// when the transaction had one there then; ok is false for any other
// address, which the committed store serves (committed blocks never
// change, and those the transaction freed stay pinned). The node must not
// be modified; it stays valid while v is among Trim's live epochs.
// Safe beside tree operations: it never waits for a block's lock.
func (tx *Trans) ReadAt(addr disk.LogicalAddr, v uint64) (disk.Node, bool) {
	tx.mu.Lock()
	b := tx.blocks[addr]
	gs := tx.gone[addr]
	tx.mu.Unlock()
	if b != nil && b.tx == tx {
		if n := pickVersion(b, v); n != nil {
			return n, true
		}
	}
	for i := len(gs) - 1; i >= 0; i-- {
		if v < gs[i].freedAt {
			if n := pickVersion(gs[i].b, v); n != nil {
				return n, true
			}
		}
	}
	return nil, false
}

// pickVersion returns b's newest version a view of v reads, or nil.
func pickVersion(b *block, v uint64) disk.Node {
	chain := *b.vers.Load()
	for i := len(chain) - 1; i >= 0; i-- {
		if chain[i].ep <= v {
			return disk.Node(chain[i].buf)
		}
	}
	return nil
}
