package compress

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Deterministic inputs shared by the tests, the fuzz seeds and the testdata
// generators. Test vectors made by other tools (liblzo2, the kernel) name the
// input they encode as "kind-seed-size", and genInput rebuilds it.

var seedFlag = flag.Uint64("compress.seed", 0, "seed for randomized tests (0: time-based); printed by each test")

// testSeed returns the seed for a randomized test and logs it so a failure
// can be replayed with -args -compress.seed=N.
func testSeed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./internal/compress -run '%s' -args -compress.seed=%d)", s, t.Name(), s)
	return s
}

// xorshift is a tiny deterministic generator whose output must never change,
// since committed test vectors depend on it.
type xorshift uint64

func newXorshift(seed uint64) *xorshift {
	x := xorshift(seed*0x9E3779B97F4A7C15 | 1)
	return &x
}

func (x *xorshift) next() uint64 {
	*x ^= *x << 13
	*x ^= *x >> 7
	*x ^= *x << 17
	return uint64(*x)
}

// genText returns n bytes of numbered lines of words: compressible but not
// trivially so (zlib about 4:1). The kernel test images hold this text.
func genText(seed uint64, n int) []byte {
	words := []string{"btrfs", "extent", "tree", "leaf", "node", "chunk", "stripe", "inode",
		"csum", "root", "key", "item", "sector", "page", "zlib", "lzo", "zstd", "data"}
	x := newXorshift(seed)
	out := make([]byte, 0, n+64)
	for line := 0; len(out) < n; line++ {
		out = fmt.Appendf(out, "%06d", line)
		k := 3 + int(x.next()%6)
		for range k {
			out = append(out, ' ')
			out = append(out, words[x.next()%uint64(len(words))]...)
		}
		out = append(out, '\n')
	}
	return out[:n]
}

// genRandom returns n incompressible bytes.
func genRandom(seed uint64, n int) []byte {
	x := newXorshift(seed)
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(x.next() >> 56)
	}
	return out
}

// genInput builds the input named by kind:
//
//	text    genText
//	random  genRandom
//	zeros   all zero (long overlapping matches, long length extensions)
//	mixed   alternating 700-byte pieces of text and random bytes
//	repeat  n/2 random bytes twice (one match at distance n/2: far matches)
//	short   random bytes from a 4-letter alphabet (many short, near matches)
func genInput(kind string, seed uint64, n int) []byte {
	switch kind {
	case "text":
		return genText(seed, n)
	case "random":
		return genRandom(seed, n)
	case "zeros":
		return make([]byte, n)
	case "mixed":
		t, r := genText(seed, n), genRandom(seed, n)
		out := make([]byte, n)
		for i := 0; i < n; i += 700 {
			src := t
			if i/700%2 == 1 {
				src = r
			}
			copy(out[i:min(i+700, n)], src[i:])
		}
		return out
	case "repeat":
		half := genRandom(seed, n/2)
		return append(append(half, half...), genRandom(seed+1, n%2)...)
	case "short":
		out := genRandom(seed, n)
		for i := range out {
			out[i] = "acgt"[out[i]&3]
		}
		return out
	}
	panic("unknown input kind " + kind)
}

// inputFromName parses "kind-seed-size" (with any extension after a dot) and
// returns that input.
func inputFromName(t testing.TB, name string) []byte {
	base, _, _ := strings.Cut(filepath.Base(name), ".")
	parts := strings.Split(base, "-")
	if len(parts) != 3 {
		t.Fatalf("test vector %q: name is not kind-seed-size", name)
	}
	seed, err1 := strconv.ParseUint(parts[1], 10, 64)
	size, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("test vector %q: bad seed or size", name)
	}
	return genInput(parts[0], seed, size)
}

// vectorInputs are the inputs encoded by liblzo2 in testdata/liblzo2.
var vectorInputs = []string{
	"text-1-1", "text-1-2", "text-1-3", "text-1-4", "text-1-5", "text-2-100",
	"text-3-4096", "text-4-32768", "random-5-3000", "random-6-4096",
	"zeros-0-10000", "mixed-7-20000", "repeat-8-34000", "short-9-4096", "short-10-300",
}

// TestDumpInputs writes the vector inputs to $COMPRESS_DUMP_INPUTS so that
// testdata can be regenerated with external tools (see testdata/README.md).
func TestDumpInputs(t *testing.T) {
	dir := os.Getenv("COMPRESS_DUMP_INPUTS")
	if dir == "" {
		t.Skip("set COMPRESS_DUMP_INPUTS=dir to write the test vector inputs")
	}
	names := append([]string(nil), vectorInputs...)
	for _, k := range kernelExtents {
		names = append(names, k.input)
	}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), inputFromName(t, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// randomInput returns an input of a random kind and size up to max.
func randomInput(r *rand.Rand, max int) []byte {
	kinds := []string{"text", "random", "zeros", "mixed", "repeat", "short"}
	n := r.IntN(max + 1)
	if r.IntN(4) == 0 {
		n = r.IntN(64)
	}
	return genInput(kinds[r.IntN(len(kinds))], r.Uint64(), n)
}
