package compress

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

var codecs = []Type{Zlib, LZO, Zstd}

func TestTypeString(t *testing.T) {
	for typ, want := range map[Type]string{None: "none", Zlib: "zlib", LZO: "lzo", Zstd: "zstd", 4: "compress(4)"} {
		if got := typ.String(); got != want {
			t.Errorf("Type(%d).String() = %q, want %q", uint8(typ), got, want)
		}
	}
	if !Zstd.Valid() || Type(4).Valid() {
		t.Error("Valid() wrong")
	}
}

// TestRoundTrip compresses and decompresses every codec across sizes and
// data kinds, reading back with the exact size, a sector-rounded dst (the
// tail must read as zeros), and with the stream zero-padded to a sector.
func TestRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 4095, 4096, 4097, 65536, MaxUncompressed}
	kinds := []string{"text", "random", "zeros", "mixed"}
	for _, typ := range codecs {
		for _, ss := range []int{4096, 16384} {
			for _, n := range sizes {
				for _, kind := range kinds {
					src := genInput(kind, uint64(n), n)
					t.Run(fmt.Sprintf("%v/ss%d/%s-%d", typ, ss, kind, n), func(t *testing.T) {
						roundTrip(t, typ, src, ss)
					})
				}
			}
		}
	}
}

func roundTrip(t *testing.T, typ Type, src []byte, ss int) {
	t.Helper()
	out, ok, err := Compress(typ, src, 0, ss)
	if err != nil {
		t.Fatalf("Compress: %v", err)
	}
	if ok != SavesSector(len(src), len(out), ss) {
		t.Fatalf("ok=%v disagrees with SavesSector for %d -> %d", ok, len(src), len(out))
	}
	if typ == LZO && len(out) > MaxCompressed {
		return // the reader rejects it, rightly: such output is never stored
	}
	dst := bytes.Repeat([]byte{0xEE}, len(src))
	if err := Decompress(typ, dst, out, ss); err != nil || !bytes.Equal(dst, src) {
		t.Fatalf("exact dst: err=%v, first diff at %d", err, firstDiff(dst, src))
	}
	padded := append(append([]byte(nil), out...), make([]byte, roundUp(len(out), ss)-len(out))...)
	dst = bytes.Repeat([]byte{0xEE}, roundUp(len(src), ss))
	if err := Decompress(typ, dst, padded, ss); err != nil {
		t.Fatalf("padded src, rounded dst: %v", err)
	}
	if !bytes.Equal(dst[:len(src)], src) || !allZero(dst[len(src):]) {
		t.Fatalf("padded src, rounded dst: wrong data (first diff %d)", firstDiff(dst, src))
	}
}

func allZero(b []byte) bool { return bytes.Count(b, []byte{0}) == len(b) }

// TestSavesSector pins the kernel's keep-compressed rule.
func TestSavesSector(t *testing.T) {
	tests := []struct {
		raw, comp int
		want      bool
	}{
		{0, 0, false}, {4096, 1, false}, {8192, 4096, true}, {8192, 4097, false},
		{8193, 8192, true}, {8193, 8193, false}, {131072, 126976, true}, {131072, 126977, false},
	}
	for _, tc := range tests {
		if got := SavesSector(tc.raw, tc.comp, 4096); got != tc.want {
			t.Errorf("SavesSector(%d, %d) = %v, want %v", tc.raw, tc.comp, got, tc.want)
		}
	}
	for _, typ := range codecs {
		if _, ok, _ := Compress(typ, genRandom(1, MaxUncompressed), 0, 4096); ok {
			t.Errorf("%v: random data reported as worth compressing", typ)
		}
		if _, ok, _ := Compress(typ, make([]byte, MaxUncompressed), 0, 4096); !ok {
			t.Errorf("%v: zeros reported as not worth compressing", typ)
		}
		// A 3000-byte file: no sector saved, but the stream is returned
		// for a possible compressed inline extent.
		out, ok, err := Compress(typ, genText(21, 3000), 0, 4096)
		if err != nil || ok || len(out) == 0 || len(out) >= 3000 {
			t.Errorf("%v small file: len=%d ok=%v err=%v", typ, len(out), ok, err)
		}
	}
}

func TestCompressArguments(t *testing.T) {
	src := genText(1, 1000)
	bad := []struct {
		name  string
		typ   Type
		src   []byte
		level int
		ss    int
	}{
		{"sector not power of two", Zlib, src, 0, 3000},
		{"sector too small", Zlib, src, 0, 256},
		{"sector too large", Zlib, src, 0, 128 << 10},
		{"too much data", Zstd, make([]byte, MaxUncompressed+1), 0, 4096},
		{"zlib level", Zlib, src, 10, 4096},
		{"zlib negative level", Zlib, src, -1, 4096},
		{"zstd level", Zstd, src, 16, 4096},
		{"zstd negative level", Zstd, src, -16, 4096},
		{"unknown type", 7, src, 0, 4096},
	}
	for _, tc := range bad {
		if _, _, err := Compress(tc.typ, tc.src, tc.level, tc.ss); err == nil || errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want a non-corruption error", tc.name, err)
		}
	}
	if out, ok, err := Compress(None, src, 0, 4096); out != nil || ok || err != nil {
		t.Errorf("None: %v %v %v", out, ok, err)
	}
	if err := Decompress(Zlib, nil, nil, 1000); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("Decompress with bad sector size: %v", err)
	}
	if err := Decompress(9, nil, nil, 4096); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Decompress with unknown type: %v, want ErrCorrupt", err)
	}
	// None copies and zero-fills.
	dst := []byte{9, 9, 9, 9}
	if err := Decompress(None, dst, []byte{1, 2}, 4096); err != nil || !bytes.Equal(dst, []byte{1, 2, 0, 0}) {
		t.Errorf("None: %v %v", dst, err)
	}
}

// TestLevels checks every accepted level produces a stream that decodes, and
// that zstd frames stay within what the kernel accepts.
func TestLevels(t *testing.T) {
	src := genText(5, 100000)
	check := func(typ Type, level int) {
		out, _, err := Compress(typ, src, level, 4096)
		if err != nil {
			t.Fatalf("%v level %d: %v", typ, level, err)
		}
		dst := make([]byte, len(src))
		if err := Decompress(typ, dst, out, 4096); err != nil || !bytes.Equal(dst, src) {
			t.Fatalf("%v level %d: %v", typ, level, err)
		}
		if typ == Zstd {
			checkKernelZstdFrame(t, out, len(src))
		}
	}
	for l := 0; l <= 9; l++ {
		check(Zlib, l)
	}
	for l := -15; l <= 15; l++ {
		check(Zstd, l)
	}
	if out, _, _ := Compress(Zlib, src, 0, 4096); out[0] != 0x78 || out[1] != 0x5E {
		t.Errorf("default zlib header % x, want 78 5e like the kernel", out[:2])
	}
}

// checkKernelZstdFrame asserts the frame properties the kernel needs: single
// segment (window = content size <= 128 KiB) with the content size, as the
// kernel's own frames are.
func checkKernelZstdFrame(t *testing.T, frame []byte, size int) {
	t.Helper()
	n, fcs, err := zstdFrame(frame)
	if err != nil || n != len(frame) || fcs != size {
		t.Fatalf("frame: len %d/%d, content size %d/%d, err %v", n, len(frame), fcs, size, err)
	}
	if frame[4]&0x20 == 0 {
		t.Fatalf("frame header %#02x: not single segment", frame[4])
	}
}

// TestShortDst: a dst shorter than the decoded data receives the prefix (the
// kernel stops once the read is satisfied); a longer one gets zeros after.
func TestShortDst(t *testing.T) {
	src := genText(3, 50000)
	for _, typ := range codecs {
		out, _, err := Compress(typ, src, 0, 4096)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 4095, 4096, 4097, 30000, 49999, 50000, 50001, 65536} {
			dst := bytes.Repeat([]byte{0xEE}, n)
			if err := Decompress(typ, dst, out, 4096); err != nil {
				t.Fatalf("%v dst %d: %v", typ, n, err)
			}
			k := min(n, len(src))
			if !bytes.Equal(dst[:k], src[:k]) || !allZero(dst[k:]) {
				t.Fatalf("%v dst %d: wrong contents", typ, n)
			}
		}
	}
}
