package disk

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestSuperblockRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, SuperblockSize)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	var s Superblock
	if err := s.Decode(b); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, SuperblockSize)
	s.Encode(out)
	if !bytes.Equal(b, out) {
		t.Fatal("superblock did not round-trip")
	}
}

func TestSuperblockOffsets(t *testing.T) {
	want := []PhysicalAddr{0x10000, 0x4000000, 0x4000000000}
	for i, w := range want {
		if got := SuperblockOffsetOf(i); got != w {
			t.Errorf("copy %d at %#x, want %#x", i, got, w)
		}
	}
}
