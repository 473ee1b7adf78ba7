package disk

import (
	"flag"
	"math/rand/v2"
	"testing"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: pick one and log it)")

// testRand returns a generator seeded from -seed or a fresh seed, logged so
// a failure can be replayed with go test -run Name -seed N.
func testRand(t testing.TB) *rand.Rand {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay: go test ./internal/disk -run %s -seed %d)", seed, t.Name(), seed)
	return rand.New(rand.NewPCG(seed, 0x5eed))
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// testItem is one item to pack into a leaf.
type testItem struct {
	key  Key
	data []byte
}

// buildLeaf packs items (which must be sorted) into a leaf of nodesize
// bytes owned by owner, with a valid crc32c checksum.
func buildLeaf(t testing.TB, nodesize int, bytenr LogicalAddr, owner ObjectID, items []testItem) Node {
	t.Helper()
	b := make([]byte, nodesize)
	h := Header{Bytenr: bytenr, Flags: DefaultHeaderFlags, Generation: 5, Owner: owner, NumItems: uint32(len(items))}
	h.Encode(b)
	end := LeafDataSize(nodesize)
	for i, it := range items {
		end -= len(it.data)
		if end < ItemSize*(i+1) {
			t.Fatalf("items do not fit a %d-byte leaf", nodesize)
		}
		PutItemHeader(b, i, Item{Key: it.key, Offset: uint32(end), Size: uint32(len(it.data))})
		copy(b[HeaderSize+end:], it.data)
	}
	CsumCRC32C.SumBlock(b)
	return Node(b)
}

// enc encodes a payload into a fresh slice.
func enc(p Payload) []byte { return EncodePayload(p) }
