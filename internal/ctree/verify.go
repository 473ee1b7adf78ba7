package ctree

import (
	"fmt"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Info describes a tree's shape, for the benchmark and tests.
type Info struct {
	Height    int   // levels: 1 for a lone leaf
	Leaves    int   // leaf blocks
	Nodes     int   // internal node blocks
	Items     int   // leaf items
	LeafBytes int64 // leaf bytes in use (item headers and data)
	// AvgLeafFill is LeafBytes over the leaves' data areas, 0..1.
	AvgLeafFill float64
}

// Verify checks every invariant of the tree as it is in tx
// (ctree-algorithms.md section 0): key order inside blocks and across them,
// each parent key equal to its child's first key, levels, generations
// (pointers match headers, no committed block points at a newer one),
// headers (bytenr, owner, fsid, chunk tree uuid, flags), leaf data packed
// without gaps or overlaps, pointer and item counts, no empty non-root
// block, every private block in the dirty set and no other. Errors wrap
// disk.ErrCorrupt. Preconditions: no operation runs on the tree.
func (t *Tree) Verify(tx *Trans) error {
	_, err := t.walkVerify(tx)
	return err
}

// Info walks the tree and returns its shape, verifying it on the way.
func (t *Tree) Info(tx *Trans) (Info, error) {
	return t.walkVerify(tx)
}

// verifier carries the state of one Verify walk.
type verifier struct {
	t    *Tree
	tx   *Trans
	info Info
	seen map[disk.LogicalAddr]bool
}

func (t *Tree) walkVerify(tx *Trans) (Info, error) {
	root := t.root.Load()
	v := &verifier{t: t, tx: tx, seen: map[disk.LogicalAddr]bool{}}
	v.info.Height = root.level() + 1
	if err := v.block(root, root.level(), nil, nil, true); err != nil {
		return v.info, err
	}
	if v.info.Leaves > 0 {
		v.info.AvgLeafFill = float64(v.info.LeafBytes) / float64(int64(v.info.Leaves)*int64(tx.lds()))
	}
	return v.info, nil
}

func (v *verifier) fail(b *block, format string, args ...any) error {
	return &disk.CorruptError{Logical: b.addr, Tree: v.t.owner, What: "verify: " + fmt.Sprintf(format, args...)}
}

// block checks b, expected at level with keys in [lo, hi) (nil: unbounded)
// and first key lo when lo is set, then its children.
func (v *verifier) block(b *block, level int, lo, hi *disk.Key, isRoot bool) error {
	if v.seen[b.addr] {
		return v.fail(b, "block reached twice")
	}
	v.seen[b.addr] = true
	if err := v.header(b, level); err != nil {
		return err
	}
	n := b.nritems()
	if n > 0 {
		if lo != nil && b.key(0) != *lo {
			return v.fail(b, "first key %v, parent key %v", b.key(0), *lo)
		}
		if hi != nil && !b.key(n-1).Less(*hi) {
			return v.fail(b, "last key %v not below the next parent key %v", b.key(n-1), *hi)
		}
	}
	for i := 1; i < n; i++ {
		if !b.key(i - 1).Less(b.key(i)) {
			return v.fail(b, "key %d %v not above key %d %v", i, b.key(i), i-1, b.key(i-1))
		}
	}
	if level == 0 {
		return v.leaf(b, isRoot)
	}
	return v.node(b, level)
}

// header checks the fields every block carries.
func (v *verifier) header(b *block, level int) error {
	tx := v.tx
	h := b.node().Header()
	switch {
	case len(b.buf) != tx.params.NodeSize:
		return v.fail(b, "block of %d bytes, node size %d", len(b.buf), tx.params.NodeSize)
	case h.Bytenr != b.addr:
		return v.fail(b, "header bytenr %d", h.Bytenr)
	case int(h.Level) != level:
		return v.fail(b, "level %d, want %d", h.Level, level)
	case h.Owner != v.t.owner:
		return v.fail(b, "owner %s", h.Owner.TreeName())
	case h.FSID != tx.params.FSID || h.ChunkTreeUUID != tx.params.ChunkTreeUUID:
		return v.fail(b, "fsid %s chunk tree uuid %s", h.FSID, h.ChunkTreeUUID)
	case h.BackrefRev() != disk.MixedBackrefRev ||
		h.Flags&^(disk.HeaderFlagWritten|disk.HeaderFlagReloc|0xff<<disk.BackrefRevShift) != 0:
		return v.fail(b, "header flags %#x", h.Flags)
	case h.Generation == 0 || h.Generation > tx.gen:
		return v.fail(b, "generation %d in transaction %d", h.Generation, tx.gen)
	}
	tx.mu.Lock()
	inDirty := tx.dirty[b.addr] == b
	inTable := tx.blocks[b.addr]
	tx.mu.Unlock()
	if tx.private(b) != inDirty {
		return v.fail(b, "private %v but in dirty set %v", tx.private(b), inDirty)
	}
	if inTable != nil && inTable != b {
		return v.fail(b, "another block object has the same address")
	}
	return nil
}

// leaf checks item packing (I3) and the non-empty rule (I4).
func (v *verifier) leaf(b *block, isRoot bool) error {
	n := b.nritems()
	lds := v.tx.lds()
	if n == 0 && !isRoot {
		return v.fail(b, "empty leaf that is not the root")
	}
	if n*ih > lds {
		return v.fail(b, "%d items cannot fit", n)
	}
	end := lds
	for i := 0; i < n; i++ {
		off, size := b.itemOffset(i), b.itemSize(i)
		if off+size != end {
			return v.fail(b, "item %d data [%d,%d) does not end at %d", i, off, off+size, end)
		}
		if off < n*ih {
			return v.fail(b, "item %d data at %d overlaps the item headers ending at %d", i, off, n*ih)
		}
		end = off
	}
	if b.freeSpace() < 0 {
		return v.fail(b, "negative free space %d", b.freeSpace())
	}
	v.info.Leaves++
	v.info.Items += n
	v.info.LeafBytes += int64(b.spaceUsed(0, n))
	return nil
}

// node checks pointer counts, pointer generations and the children.
func (v *verifier) node(b *block, level int) error {
	n := b.nritems()
	if n < 1 || n > v.tx.np() {
		return v.fail(b, "node with %d pointers, want 1..%d", n, v.tx.np())
	}
	v.info.Nodes++
	committed := !v.tx.private(b)
	for i := 0; i < n; i++ {
		child, err := v.t.readChild(v.tx, b, i)
		if err != nil {
			return fmt.Errorf("verify: child %d of block %d: %w", i, b.addr, err)
		}
		if child.generation() != b.ptrGen(i) {
			return v.fail(b, "pointer %d generation %d, child %d has %d", i, b.ptrGen(i), child.addr, child.generation())
		}
		if committed && child.generation() > b.generation() {
			return v.fail(b, "committed block (generation %d) points at newer block %d (generation %d)",
				b.generation(), child.addr, child.generation())
		}
		lo := b.ptrKey(i)
		var hi *disk.Key
		if i+1 < n {
			k := b.ptrKey(i + 1)
			hi = &k
		}
		if err := v.block(child, level-1, &lo, hi, false); err != nil {
			return err
		}
	}
	return nil
}
