package ctree

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/gobtrfs/btrfs/internal/disk"
)

var le = binary.LittleEndian

// Short names for the fixed sizes every algorithm below counts in.
const (
	hdr = disk.HeaderSize // 101: item offsets are relative to the end of the header
	ih  = disk.ItemSize   // 25: one leaf item header
	kp  = disk.KeyPtrSize // 33: one node key pointer
)

// Header field offsets (struct btrfs_header) the engine writes directly.
const (
	offFSID      = 0x20
	offBytenr    = 0x30
	offFlags     = 0x38
	offChunkUUID = 0x40
	offGen       = 0x50
	offOwner     = 0x58
	offNritems   = 0x60
	offLevel     = 0x64
)

// block is one tree block held in memory: the kernel's extent buffer. The
// bytes are the on-disk block. A block is either committed (read from the
// store: its bytes belong to the store and are never changed) or private to
// the running transaction (created by COW or allocation, not yet written:
// changed in place under its write lock).
type block struct {
	addr disk.LogicalAddr // immutable
	// mu is the per-block reader/writer lock of the kernel's locking
	// protocol (ctree-algorithms.md section 9). It guards buf's contents.
	mu  sync.RWMutex
	buf []byte // nodesize bytes
	// treeStats are the counters of the tree that created the block (nil
	// for committed blocks read from the store), so that WriteDirty,
	// which sees blocks and not trees, can count writes per tree.
	treeStats *Stats // immutable
	// mod counts the write locks taken on the block: every change of
	// buf happens under one, so a reader holding the read lock sees the
	// contents that go with the count it reads (Trans.SnapshotVersion).
	// Guarded by mu.
	mod uint64
	// tx is the transaction that made the block, for a private block;
	// nil for committed blocks read from the store, which never change.
	// Immutable.
	tx *Trans
	// ep is the view epoch buf belongs to: views published at ep or
	// later see it (Trans.Publish). Guarded by mu.
	ep uint64
	// vers is what published views read of a private block (Trans.ReadAt):
	// buf's versions some view may still reach, oldest first, the last
	// being buf itself. A version is never written once a later one
	// exists, so readers use it without locks. Replaced whole.
	vers atomic.Pointer[[]bufVersion]
	// keepPending says a node's bytes are to be kept for views before its
	// first edit under the write lock held now (lockW, edit). Guarded by
	// mu.
	keepPending bool
}

// bufVersion is one version of a private block's bytes: views published
// at ep or later (and before the next version's ep) read buf.
type bufVersion struct {
	ep  uint64
	buf []byte
}

// lockW takes the block's write lock, which every change of its bytes
// needs, and counts it. The first write lock of a private block after a
// publication (Trans.Publish) leaves the published bytes to the views
// that may read them and lets the change edit a copy (Trans.keepForViews):
// copy on first write per epoch, and only while a live view may read
// them. Otherwise it costs two atomic loads.
func (b *block) lockW() {
	b.mu.Lock()
	b.mod++
	if b.tx != nil {
		e := b.tx.wep.Load()
		keep := b.ep < e && b.ep < b.tx.liveTop.Load()
		// A node is often write-locked for a split below it that does
		// not come: its copy waits for its first edit (edit).
		b.keepPending = keep && b.level() > 0
		if keep && !b.keepPending {
			b.tx.keepForViews(b, e)
		}
	}
}

// edit is called by every primitive that changes a node's bytes (the
// pointer setters and movers, setNritems; nodes.go's level reset), with
// the write lock held, before the change: the copy lockW left pending is
// made now. Leaves were copied in lockW (their item data is edited
// through slices callers hold).
func (b *block) edit() {
	if b.keepPending {
		b.keepPending = false
		b.tx.keepForViews(b, b.tx.wep.Load())
	}
}

// headerBytes returns bytes of the block whose header may be read without
// its lock: a committed block's buf never changes, and a private block's
// newest version is published atomically (buf itself is replaced under
// the write lock when its bytes are kept for views).
func (b *block) headerBytes() []byte {
	if b.tx != nil {
		if v := b.vers.Load(); v != nil && len(*v) > 0 {
			return (*v)[len(*v)-1].buf
		}
	}
	return b.buf
}

// node returns the block as a read-only disk.Node view.
func (b *block) node() disk.Node { return disk.Node(b.buf) }

func (b *block) nritems() int                { return int(le.Uint32(b.buf[offNritems:])) }
func (b *block) setNritems(n int)            { b.edit(); le.PutUint32(b.buf[offNritems:], uint32(n)) }
func (b *block) level() int                  { return int(b.buf[offLevel]) }
func (b *block) generation() disk.Generation { return disk.Generation(le.Uint64(b.buf[offGen:])) }
func (b *block) flags() uint64               { return le.Uint64(b.buf[offFlags:]) }
func (b *block) written() bool               { return b.flags()&disk.HeaderFlagWritten != 0 }

// Leaf accessors. Item i's header lives at hdr+ih*i; its data at
// hdr+offset(i), offset being relative to the end of the header.

func (b *block) itemKey(i int) disk.Key { return disk.KeyAt(b.buf[hdr+ih*i:]) }
func (b *block) itemOffset(i int) int   { return int(le.Uint32(b.buf[hdr+ih*i+17:])) }
func (b *block) itemSize(i int) int     { return int(le.Uint32(b.buf[hdr+ih*i+21:])) }
func (b *block) itemEnd(i int) int      { return b.itemOffset(i) + b.itemSize(i) }
func (b *block) setItemKey(i int, k disk.Key) {
	k.Encode(b.buf[hdr+ih*i:])
}
func (b *block) setItemOffset(i, off int) { le.PutUint32(b.buf[hdr+ih*i+17:], uint32(off)) }
func (b *block) setItemSize(i, size int)  { le.PutUint32(b.buf[hdr+ih*i+21:], uint32(size)) }

// itemData returns item i's payload as a sub-slice of the block.
func (b *block) itemData(i int) []byte {
	off := hdr + b.itemOffset(i)
	return b.buf[off : off+b.itemSize(i) : off+b.itemSize(i)]
}

// Node accessors.

func (b *block) ptrKey(i int) disk.Key { return disk.KeyAt(b.buf[hdr+kp*i:]) }
func (b *block) ptrAddr(i int) disk.LogicalAddr {
	return disk.LogicalAddr(le.Uint64(b.buf[hdr+kp*i+17:]))
}
func (b *block) ptrGen(i int) disk.Generation {
	return disk.Generation(le.Uint64(b.buf[hdr+kp*i+25:]))
}
func (b *block) setPtrKey(i int, k disk.Key) { b.edit(); k.Encode(b.buf[hdr+kp*i:]) }
func (b *block) setPtr(i int, k disk.Key, addr disk.LogicalAddr, gen disk.Generation) {
	b.edit()
	disk.PutKeyPtr(b.buf, i, disk.KeyPtr{Key: k, BlockPtr: addr, Generation: gen})
}

// key returns the key at slot i of a leaf or a node.
func (b *block) key(i int) disk.Key {
	if b.level() == 0 {
		return b.itemKey(i)
	}
	return b.ptrKey(i)
}

// firstKey is the key at slot 0, or the zero key for an empty block.
func (b *block) firstKey() disk.Key {
	if b.nritems() == 0 {
		return disk.Key{}
	}
	return b.key(0)
}

// setKey replaces the key at slot i of a leaf or a node.
func (b *block) setKey(i int, k disk.Key) {
	if b.level() == 0 {
		b.setItemKey(i, k)
	} else {
		b.setPtrKey(i, k)
	}
}

// Leaf space accounting (ctree-algorithms.md section 0). All of it relies
// on I3: item data packed downward from the end without gaps.

// dataEnd is the lowest data offset in use: the last item's offset, or the
// leaf data size when the leaf is empty.
func (b *block) dataEnd() int {
	n := b.nritems()
	if n == 0 {
		return len(b.buf) - hdr
	}
	return b.itemOffset(n - 1)
}

// spaceUsed is the bytes (headers and data) items [start, start+nr) use.
func (b *block) spaceUsed(start, nr int) int {
	if nr == 0 {
		return 0
	}
	n := b.nritems()
	end := min(n, start+nr) - 1
	return b.itemEnd(start) - b.itemOffset(end) + nr*ih
}

// freeSpace is the unused bytes of a leaf.
func (b *block) freeSpace() int {
	return len(b.buf) - hdr - b.spaceUsed(0, b.nritems())
}

// search finds key among slots [low, nritems) of a leaf or node: the slot
// holding it (found) or the slot where it would be inserted.
func (b *block) search(k disk.Key, low int) (slot int, found bool) {
	lo, hi := low, b.nritems()
	leaf := b.level() == 0
	stride := kp
	if leaf {
		stride = ih
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := disk.KeyAt(b.buf[hdr+stride*m:]).Compare(k)
		switch {
		case c < 0:
			lo = m + 1
		case c > 0:
			hi = m
		default:
			return m, true
		}
	}
	return lo, false
}

// recomputeOffsets rewrites every item offset of a leaf from the end of the
// data area downward, each item ending where the previous one starts. After
// a bulk move this is simpler and safer than adjusting offsets (I3).
func (b *block) recomputeOffsets() {
	off := len(b.buf) - hdr
	for i := 0; i < b.nritems(); i++ {
		off -= b.itemSize(i)
		b.setItemOffset(i, off)
	}
}

// Byte moves inside one block. Ranges are in data-area coordinates for
// moveData (relative to the end of the header) and in slots for the header
// and pointer moves.

// moveData moves n bytes of leaf data from offset src to offset dst.
func (b *block) moveData(dst, src, n int) {
	copy(b.buf[hdr+dst:hdr+dst+n], b.buf[hdr+src:hdr+src+n])
}

// moveItems moves nr item headers from slot src to slot dst.
func (b *block) moveItems(dst, src, nr int) {
	copy(b.buf[hdr+ih*dst:hdr+ih*(dst+nr)], b.buf[hdr+ih*src:hdr+ih*(src+nr)])
}

// movePtrs moves nr key pointers from slot src to slot dst.
func (b *block) movePtrs(dst, src, nr int) {
	b.edit()
	copy(b.buf[hdr+kp*dst:hdr+kp*(dst+nr)], b.buf[hdr+kp*src:hdr+kp*(src+nr)])
}

// copyItemsFrom copies nr item headers from slot src of o to slot dst of b.
func (b *block) copyItemsFrom(o *block, dst, src, nr int) {
	copy(b.buf[hdr+ih*dst:hdr+ih*(dst+nr)], o.buf[hdr+ih*src:hdr+ih*(src+nr)])
}

// copyPtrsFrom copies nr key pointers from slot src of o to slot dst of b.
func (b *block) copyPtrsFrom(o *block, dst, src, nr int) {
	b.edit()
	copy(b.buf[hdr+kp*dst:hdr+kp*(dst+nr)], o.buf[hdr+kp*src:hdr+kp*(src+nr)])
}

// copyDataFrom copies n data bytes at offset src of o to offset dst of b.
func (b *block) copyDataFrom(o *block, dst, src, n int) {
	copy(b.buf[hdr+dst:hdr+dst+n], o.buf[hdr+src:hdr+src+n])
}
