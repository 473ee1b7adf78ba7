package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestZlibTolerance: the kernel neither checks the Adler-32 trailer nor looks
// past the end of the deflate data.
func TestZlibTolerance(t *testing.T) {
	src := genText(4, 20000)
	out, _, _ := Compress(Zlib, src, 0, 4096)
	garbled := append([]byte(nil), out...)
	garbled[len(garbled)-1] ^= 0xFF
	for name, in := range map[string][]byte{
		"no trailer":      out[:len(out)-4],
		"partial trailer": out[:len(out)-2],
		"garbled trailer": garbled,
		"trailing junk":   append(append([]byte(nil), out...), 1, 2, 3),
	} {
		dst := make([]byte, len(src)+100) // larger, so the stream end must be seen
		if err := Decompress(Zlib, dst, in, 4096); err != nil || !bytes.Equal(dst[:len(src)], src) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, hdr := range map[string][]byte{
		"method 7":     {0x77, 0x5F},
		"window 64K":   {0x88, 0x1C},
		"check bits":   {0x78, 0x5F},
		"preset dict":  {0x78, 0x7D},
		"one byte":     {0x78},
		"empty stream": {},
	} {
		in := append(append([]byte(nil), hdr...), out[min(2, len(hdr)):]...)
		if len(hdr) < 2 {
			in = hdr
		}
		if err := Decompress(Zlib, make([]byte, 10), in, 4096); !errors.Is(err, ErrCorrupt) {
			t.Errorf("header %s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

// zstdWith encodes src with explicit encoder options.
func zstdWith(t *testing.T, src []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(src, nil)
}

// TestZstdFrames covers frame shapes other writers could produce.
func TestZstdFrames(t *testing.T) {
	src := genText(6, 60000)
	dec := func(in []byte, n int) ([]byte, error) {
		dst := bytes.Repeat([]byte{0xEE}, n)
		return dst, Decompress(Zstd, dst, in, 4096)
	}
	good := func(name string, in []byte) {
		t.Helper()
		dst, err := dec(in, len(src)+5000)
		if err != nil || !bytes.Equal(dst[:len(src)], src) || !allZero(dst[len(src):]) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := func(name string, in []byte) {
		t.Helper()
		if _, err := dec(in, len(src)+5000); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	plain, _, _ := Compress(Zstd, src, 0, 4096)
	good("padding and junk after the frame", append(append([]byte(nil), plain...), 0, 0, 0, 0x28, 0xB5, 0x2F, 0xFD, 9))
	crc := zstdWith(t, src, zstd.WithEncoderCRC(true), zstd.WithWindowSize(zstdMaxWindow))
	good("with checksum", crc)
	crcBad := append([]byte(nil), crc...)
	crcBad[len(crcBad)-1] ^= 1
	bad("wrong checksum", crcBad)
	// The same blocks behind a header without content size (window
	// descriptor 0x38 = 128 KiB) take the streaming path.
	if plain[4] != 0x60 {
		t.Fatalf("frame header descriptor %#02x, want 0x60 (single segment, 2-byte size)", plain[4])
	}
	noSize := append([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38}, plain[7:]...)
	if _, fcs, _ := zstdFrame(noSize); fcs != -1 {
		t.Fatalf("frame unexpectedly has content size %d", fcs)
	}
	good("no content size", noSize)
	if dst, err := dec(noSize, 1000); err != nil || !bytes.Equal(dst, src[:1000]) {
		t.Errorf("no content size, short dst: %v", err)
	}
	if dst, err := dec(plain, 1000); err != nil || !bytes.Equal(dst, src[:1000]) {
		t.Errorf("content size above len(dst): %v", err)
	}
	big := genText(7, 300000)
	wide := zstdWith(t, big, zstd.WithWindowSize(256<<10), zstd.WithSingleSegment(false))
	if err := Decompress(Zstd, make([]byte, len(big)), wide, 4096); !errors.Is(err, ErrCorrupt) {
		t.Errorf("256 KiB window: err = %v, want ErrCorrupt", err)
	}
	skippable := append([]byte{0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0}, plain...)
	bad("skippable frame first", skippable)
	bad("not zstd", []byte("hello world"))
	for _, cut := range []int{0, 4, 5, 6, 8, len(plain) / 2, len(plain) - 1} {
		bad("truncated", plain[:cut])
	}
	reserved := append([]byte(nil), plain...)
	reserved[4] |= 0x08
	bad("reserved header bit", reserved)
	// Content size smaller than the data: the frame is inconsistent.
	small := append([]byte(nil), plain...)
	small[5], small[6] = 0, 0 // 2-byte field: 256 + 0
	bad("content size too small", small)
	dict := zstdWith(t, src, zstd.WithEncoderDictRaw(7, genText(9, 1000)), zstd.WithWindowSize(zstdMaxWindow))
	bad("unknown dictionary", dict)
}

// TestTruncated cuts valid encodings everywhere before the end of their data;
// each cut must fail with ErrCorrupt when dst asks for more than remains.
func TestTruncated(t *testing.T) {
	for _, typ := range codecs {
		for _, src := range [][]byte{genText(8, 9000), genInput("mixed", 8, 9000), genText(8, 100)} {
			out, _, err := Compress(typ, src, 0, 4096)
			if err != nil {
				t.Fatal(err)
			}
			end := len(out)
			if typ == Zlib {
				end -= 4 // the Adler-32 trailer is not needed
			}
			dst := make([]byte, len(src)+1)
			// Every cut near the ends (headers, trailers), a stride between.
			for cut := 0; cut < end; cut++ {
				if cut > 64 && cut < end-64 && cut%37 != 0 {
					continue
				}
				if err := Decompress(typ, dst, out[:cut], 4096); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%v: %d-byte stream cut to %d: err = %v", typ, len(out), cut, err)
				}
			}
		}
	}
}

// TestMutations flips, inserts and deletes bytes in valid encodings. Any
// outcome but a panic or a non-corruption error is acceptable.
func TestMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 0))
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	for _, typ := range codecs {
		var encs [][]byte
		for _, kind := range []string{"text", "mixed", "zeros", "short"} {
			out, _, _ := Compress(typ, genInput(kind, 2, 20000), 0, 4096)
			encs = append(encs, out)
		}
		for range iters {
			in := mutate(r, encs[r.IntN(len(encs))])
			dst := make([]byte, r.IntN(40000))
			if err := Decompress(typ, dst, in, 4096); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: error does not wrap ErrCorrupt: %v", typ, err)
			}
		}
	}
}

// mutate returns a damaged copy of b.
func mutate(r *rand.Rand, b []byte) []byte {
	b = append([]byte(nil), b...)
	for range 1 + r.IntN(4) {
		if len(b) == 0 {
			return b
		}
		i := r.IntN(len(b))
		switch r.IntN(5) {
		case 0:
			b[i] ^= byte(1 << r.IntN(8))
		case 1:
			b[i] = byte(r.IntN(256))
		case 2:
			b = append(b[:i], b[i+1:]...)
		case 3:
			b = append(b[:i], append([]byte{byte(r.IntN(256))}, b[i:]...)...)
		case 4:
			b = b[:i]
		}
	}
	return b
}

// TestAllocationBound decodes hostile inputs that announce more data than
// they hold and checks the bytes allocated per call stay near len(dst).
func TestAllocationBound(t *testing.T) {
	fcsHuge := []byte{0x28, 0xB5, 0x2F, 0xFD, 0xE0} // single segment, 8-byte content size
	fcsHuge = binary.LittleEndian.AppendUint64(fcsHuge, 1<<40)
	fcsHuge = append(fcsHuge, 0x01, 0, 0) // one empty raw last block
	lzoHuge := lzoFrame(-1, append([]byte{0x00, 0x00, 0x00, 0x00}, bytes.Repeat([]byte{0}, 4000)...))
	cases := map[Type][][]byte{
		Zstd: {fcsHuge, append([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x58}, 0xFF, 0xFF, 0xFF)},
		LZO:  {lzoHuge},
		Zlib: {{0x78, 0x5E, 0xED, 0xC1, 0x01, 0x0D, 0x00, 0x00}},
	}
	for typ, inputs := range cases {
		for _, in := range inputs {
			dst := make([]byte, 4096)
			per := allocPerCall(func() { _ = Decompress(typ, dst, in, 4096) })
			if per > 64<<10 {
				t.Errorf("%v: %d bytes allocated per call for a 4 KiB dst", typ, per)
			}
		}
	}
	// Valid 128 KiB decodes reuse pooled state.
	for _, typ := range codecs {
		src := genText(1, MaxUncompressed)
		out, _, _ := Compress(typ, src, 0, 4096)
		dst := make([]byte, len(src))
		per := allocPerCall(func() {
			if err := Decompress(typ, dst, out, 4096); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%v: %d bytes allocated per 128 KiB decode", typ, per)
		if per > 16<<10 {
			t.Errorf("%v: %d bytes allocated per 128 KiB decode", typ, per)
		}
	}
}

// allocPerCall returns the average bytes allocated by f after a warm-up.
func allocPerCall(f func()) uint64 {
	const runs = 50
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}
