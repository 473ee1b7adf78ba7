package dump

import (
	"encoding/binary"

	"github.com/gobtrfs/btrfs/internal/disk"
)

var le = binary.LittleEndian

// view reads the fields of one item the way btrfs-progs does: at their
// offset from the start of the item, through the whole tree block, so a
// field past the end of a short item reads the bytes that follow it in the
// block (another item's data) rather than failing. Bytes past the end of the
// block read as zero; progs would read whatever memory follows its buffer
// there, which cannot be reproduced.
//
// Printing through a view keeps the text output byte-identical to progs on
// damaged items while never reading outside the block.
type view struct {
	b   []byte // the whole block (or superblock)
	off int    // absolute offset of the item's first byte in b
}

// at returns the view of the bytes starting rel bytes into v.
func (v view) at(rel int) view { return view{b: v.b, off: v.off + rel} }

// copyOut copies n bytes at rel into dst, zero-filling what lies outside
// the block.
func (v view) copyOut(dst []byte, rel int) {
	clear(dst)
	start := v.off + rel
	if start < 0 {
		return
	}
	if start >= len(v.b) {
		return
	}
	copy(dst, v.b[start:])
}

// bytes returns a copy of n bytes at rel (zero-filled past the block).
func (v view) bytes(rel, n int) []byte {
	if n <= 0 {
		return nil
	}
	out := make([]byte, n)
	v.copyOut(out, rel)
	return out
}

func (v view) u8(rel int) uint8 {
	var b [1]byte
	v.copyOut(b[:], rel)
	return b[0]
}

func (v view) u16(rel int) uint16 {
	var b [2]byte
	v.copyOut(b[:], rel)
	return le.Uint16(b[:])
}

func (v view) u32(rel int) uint32 {
	var b [4]byte
	v.copyOut(b[:], rel)
	return le.Uint32(b[:])
}

func (v view) u64(rel int) uint64 {
	var b [8]byte
	v.copyOut(b[:], rel)
	return le.Uint64(b[:])
}

func (v view) key(rel int) disk.Key {
	var b [disk.KeySize]byte
	v.copyOut(b[:], rel)
	return disk.KeyAt(b[:])
}

func (v view) uuid(rel int) disk.UUID {
	var u disk.UUID
	v.copyOut(u[:], rel)
	return u
}

// cstr returns n bytes at rel cut at the first NUL: what C's "%.*s" prints.
func (v view) cstr(rel, n int) string {
	b := v.bytes(rel, n)
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// nameMax is BTRFS_NAME_LEN: progs copies names (and xattr values) into a
// buffer of this size, so longer ones are printed cut to it.
const nameMax = 255

// name returns a name of nameLen bytes at rel the way progs prints it:
// at most nameMax bytes, cut at the first NUL.
func (v view) name(rel, nameLen int) string { return v.cstr(rel, min(nameLen, nameMax)) }

// zeroFilled returns a view over a private copy of the item's first size
// bytes followed by zeros up to want bytes: how progs reads structures it
// copies out of an item with a bounded length (root items).
func (v view) zeroFilled(size, want int) view {
	buf := make([]byte, want)
	v.copyOut(buf[:min(max(size, 0), want)], 0)
	return view{b: buf}
}
