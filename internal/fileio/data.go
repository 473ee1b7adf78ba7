package fileio

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Block contents with Verify: every block says where it belongs and which
// write made it (file, offset, version: 24 bytes), followed by bytes
// derived from the three, so a block read back can be checked alone, and
// the model of the last version written to each block says what every
// file must hold after the run. Version 0 is what the prepare phase
// wrote.

const blockHeader = 24

// fillBlock fills p with the content of the block at off of file, version v.
func fillBlock(p []byte, file int, off int64, v uint64) {
	var h [blockHeader]byte
	binary.LittleEndian.PutUint64(h[0:], uint64(file))
	binary.LittleEndian.PutUint64(h[8:], uint64(off))
	binary.LittleEndian.PutUint64(h[16:], v)
	n := copy(p, h[:])
	// splitmix64 from the header: cheap, and different for every block
	// and version.
	s := uint64(file)*0x9e3779b97f4a7c15 ^ uint64(off)*0xbf58476d1ce4e5b9 ^ v*0x94d049bb133111eb
	for i := n; i < len(p); i += 8 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], z)
		copy(p[i:], w[:])
	}
}

// checkBlock verifies that p is a block written for off of file, and
// returns its version. scratch must be as long as p.
func checkBlock(p, scratch []byte, file int, off int64) (uint64, error) {
	var v uint64
	if len(p) >= blockHeader {
		f, o := binary.LittleEndian.Uint64(p[0:]), binary.LittleEndian.Uint64(p[8:])
		if f != uint64(file) || o != uint64(off) {
			return 0, fmt.Errorf("%s at %d holds the block of %s at %d", fileName(file), off, fileName(int(f)), o)
		}
		v = binary.LittleEndian.Uint64(p[16:])
	}
	fillBlock(scratch, file, off, v)
	if !bytes.Equal(p, scratch) {
		return 0, fmt.Errorf("%s at %d: damaged block (version %d)", fileName(file), off, v)
	}
	return v, nil
}
