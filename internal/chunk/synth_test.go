package chunk_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// gfMulSlow multiplies in GF(2^8) mod x^8+x^4+x^3+x^2+1 bit by bit: the
// test's own arithmetic, independent of the package's tables.
func gfMulSlow(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		carry := a & 0x80
		a <<= 1
		if carry != 0 {
			a ^= 0x1d
		}
		b >>= 1
	}
	return p
}

func gfPowSlow(j int) byte {
	x := byte(1)
	for range j {
		x = gfMulSlow(x, 2)
	}
	return x
}

// pattern returns the expected content of logical range [l, l+n): each
// aligned 8-byte word is a hash of its address.
func pattern(l disk.LogicalAddr, n int) []byte {
	out := make([]byte, n+16)
	first := uint64(l) &^ 7
	for i := 0; i < len(out)-8; i += 8 {
		x := (first/8 + uint64(i)/8 + 1) * 0x9e3779b97f4a7c15
		binary.LittleEndian.PutUint64(out[i:], x^x>>29)
	}
	skip := int(uint64(l) - first)
	return out[skip : skip+n : skip+n]
}

// patternVerify accepts bytes equal to the pattern.
func patternVerify(l disk.LogicalAddr, b []byte) bool { return bytes.Equal(b, pattern(l, len(b))) }

// synth is a chunk written onto memory devices by the test's own layout.
type synth struct {
	profile string
	n       int
	start   disk.LogicalAddr
	item    *disk.ChunkItem
	m       *chunk.Map
	devs    map[disk.DevID]*blockdev.Mem
	offs    []disk.PhysicalAddr
}

// newSynth writes rows full rows of a chunk with n stripes. Stripe k lives
// on devid k+1 (DUP: both on devid 1) at a stripe-misaligned offset, to
// catch offsets wrongly rounded.
func newSynth(t testing.TB, profile string, n, rows int) *synth {
	s := &synth{profile: profile, n: n, start: 7<<30 + 3*S, devs: make(map[disk.DevID]*blockdev.Mem)}
	var devids []disk.DevID
	for k := range n {
		id := disk.DevID(k + 1)
		if profile == "dup" {
			id = 1
		}
		devids = append(devids, id)
		s.offs = append(s.offs, disk.PhysicalAddr(1<<20+k*(rows+2)*S+4096*(k+1)))
	}
	probe := mkChunk(profile, 1<<20, devids, s.offs)
	dataCols := 1 << 20 / chunk.StripeSizeOnDevice(probe)
	s.item = mkChunk(profile, uint64(rows)*dataCols*S, devids, s.offs)
	for _, id := range devids {
		if s.devs[id] == nil {
			s.devs[id] = blockdev.NewMem(int64(1<<20 + n*(rows+2)*S + 1<<20))
		}
	}
	s.m = chunk.NewMap(4096)
	if err := s.m.Add(s.start, s.item); err != nil {
		t.Fatal(err)
	}
	s.write(t, int(dataCols))
	return s
}

// write lays the pattern and parity out with layout().
func (s *synth) write(t testing.TB, dataCols int) {
	elements := int(s.item.Length / S)
	pl := layout(s.profile, s.n, elements)
	put := func(stripe int, row uint64, b []byte) {
		st := s.item.Stripes[stripe]
		if _, err := s.devs[st.DevID].WriteAt(b, int64(st.Offset)+int64(row*S)); err != nil {
			t.Fatal(err)
		}
	}
	for e := range elements {
		data := pattern(s.start+disk.LogicalAddr(e*S), S)
		for _, c := range pl[e].copies {
			put(c.stripe, c.rel, data)
		}
	}
	if pl[0].p < 0 {
		return
	}
	for row := 0; row*dataCols < elements; row++ {
		p, q := make([]byte, S), make([]byte, S)
		for j := range dataCols {
			data := pattern(s.start+disk.LogicalAddr((row*dataCols+j)*S), S)
			g := gfPowSlow(j)
			for i := range data {
				p[i] ^= data[i]
				q[i] ^= gfMulSlow(g, data[i])
			}
		}
		e := pl[row*dataCols]
		put(e.p, uint64(row), p)
		if e.q >= 0 {
			put(e.q, uint64(row), q)
		}
	}
}

// reader returns a Reader over every device except those dropped.
func (s *synth) reader(drop ...disk.DevID) *chunk.Reader {
	devs := make(map[disk.DevID]blockdev.Device)
	for id, d := range s.devs {
		devs[id] = d
	}
	for _, id := range drop {
		delete(devs, id)
	}
	return chunk.NewReader(s.m, devs)
}

// garble overwrites the whole stripe k with junk.
func (s *synth) garble(t testing.TB, k int) {
	st := s.item.Stripes[k]
	junk := bytes.Repeat([]byte{0xa5, 0x17, 0x3c}, int(chunk.StripeSizeOnDevice(s.item)/3+1))
	if _, err := s.devs[st.DevID].WriteAt(junk[:chunk.StripeSizeOnDevice(s.item)], int64(st.Offset)); err != nil {
		t.Fatal(err)
	}
}

// clone returns a copy of s with independent devices.
func (s *synth) clone() *synth {
	c := *s
	c.devs = make(map[disk.DevID]*blockdev.Mem)
	for id, d := range s.devs {
		c.devs[id] = d.Clone()
	}
	return &c
}

// synthCache keeps one pristine synth per geometry for tests that damage
// clones of it.
var synthCache = map[string]*synth{}

func cachedSynth(t testing.TB, profile string, n, rows int) *synth {
	key := fmt.Sprint(profile, n, rows)
	if s, ok := synthCache[key]; ok {
		return s.clone()
	}
	s := newSynth(t, profile, n, rows)
	synthCache[key] = s
	return s.clone()
}
