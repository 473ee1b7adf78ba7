package compress

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime/metrics"
	"testing"
)

// Fuzz targets: each decoder must reject bad input with ErrCorrupt, never
// panic, and allocate little beyond the dst the caller provides. Seeds are
// valid encodings (ours and the kernel's), so mutations start from streams
// that reach deep into the decoders. Run one with, for example,
//
//	go test ./internal/compress -run '^$' -fuzz FuzzDecompressLZO -fuzztime 5m -fuzzminimizetime 2s
//
// (the default minimize time of 60s per new input makes short runs look
// stalled: minimizing a multi-KiB seed takes a million calls).

func FuzzDecompressZlib(f *testing.F) { fuzzDecompress(f, Zlib) }
func FuzzDecompressLZO(f *testing.F)  { fuzzDecompress(f, LZO) }
func FuzzDecompressZstd(f *testing.F) { fuzzDecompress(f, Zstd) }

// fuzzAllocSlack is how many bytes a Decompress call may allocate besides
// dst: pooled codec state rebuilt after a GC emptied the pools fits, an
// allocation driven by a size the input claims does not.
const fuzzAllocSlack = 4 << 20

func fuzzDecompress(f *testing.F, typ Type) {
	for _, in := range []string{"text-1-5000", "mixed-2-9000", "zeros-0-20000", "short-3-3000", "text-4-1"} {
		src := inputFromName(f, in)
		out, _, err := Compress(typ, src, 0, 4096)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(out, uint32(len(src)))
		f.Add(out, uint32(roundUp(len(src), 4096)))
	}
	for _, k := range kernelExtents {
		if k.typ == typ {
			b, err := os.ReadFile(filepath.Join("testdata", "kernel", k.file))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint32(k.ramBytes))
		}
	}
	f.Fuzz(func(t *testing.T, src []byte, dstLen uint32) {
		dst := make([]byte, dstLen%(2*MaxUncompressed+1))
		before := heapAllocBytes()
		err := Decompress(typ, dst, src, 4096)
		after := heapAllocBytes()
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		}
		if a := after - before; a > uint64(len(dst))+fuzzAllocSlack {
			t.Fatalf("allocated %d bytes for a %d-byte dst", a, len(dst))
		}
	})
}

// heapAllocBytes returns the bytes allocated on the heap so far. Unlike
// runtime.ReadMemStats it does not stop the world, so it is cheap enough to
// call around every fuzz input; small allocations may be counted late, which
// the slack absorbs.
func heapAllocBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzLZO1X feeds arbitrary bytes to the raw LZO1X decoder, and checks that
// whatever it produces survives a trip through the encoder.
func FuzzLZO1X(f *testing.F) {
	var table lzoTable
	for _, name := range vectorInputs {
		f.Add(lzo1xCompress(nil, inputFromName(f, name), &table), uint16(4096))
	}
	f.Add([]byte{0x11, 0, 0}, uint16(0))
	f.Fuzz(func(t *testing.T, src []byte, dstLen uint16) {
		dst := make([]byte, dstLen)
		n, err := lzo1xDecompress(dst, src)
		if n < 0 || n > len(dst) {
			t.Fatalf("reported %d bytes for a %d-byte dst", n, len(dst))
		}
		if err != nil {
			return
		}
		var tab lzoTable
		enc := lzo1xCompress(nil, dst[:n], &tab)
		back := make([]byte, n)
		if m, err := lzo1xDecompress(back, enc); err != nil || m != n || !bytes.Equal(back, dst[:n]) {
			t.Fatalf("re-encoding the output does not round-trip: %v", err)
		}
	})
}

// FuzzRoundTrip compresses arbitrary data with every codec and level class
// and checks it decodes back, padded to a sector as on disk.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("hello, hello, hello btrfs"), uint8(0), int8(0))
	f.Add(genText(1, 9000), uint8(1), int8(9))
	f.Add(genInput("mixed", 1, 5000), uint8(2), int8(-5))
	f.Add(make([]byte, 20000), uint8(1), int8(1))
	f.Fuzz(func(t *testing.T, data []byte, which uint8, level int8) {
		typ := codecs[int(which)%len(codecs)]
		lvl := int(level)
		switch typ {
		case Zlib:
			lvl = int(uint8(level) % 10)
		case Zstd:
			lvl = int(level) % 16
		}
		if len(data) > MaxUncompressed {
			data = data[:MaxUncompressed]
		}
		out, _, err := Compress(typ, data, lvl, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > MaxCompressed {
			return
		}
		padded := append(out, make([]byte, roundUp(len(out), 4096)-len(out))...)
		dst := make([]byte, roundUp(len(data), 4096))
		if err := Decompress(typ, dst, padded, 4096); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst[:len(data)], data) || !allZero(dst[len(data):]) {
			t.Fatalf("%v level %d: round trip differs at %d", typ, lvl, firstDiff(dst, data))
		}
	})
}
