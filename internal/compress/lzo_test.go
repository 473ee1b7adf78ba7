package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLZO1XLiblzo2Vectors decodes raw streams made by liblzo2 2.10
// (lzo1x_1_compress: *.x1, lzo1x_999_compress: *.x999, which also uses the
// state-dependent short matches) and checks the output bound is enforced.
func TestLZO1XLiblzo2Vectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "liblzo2", "*"))
	if err != nil || len(files) < 2*len(vectorInputs) {
		t.Fatalf("found %d liblzo2 vectors (%v), want %d", len(files), err, 2*len(vectorInputs))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := inputFromName(t, f)
			dst := make([]byte, len(want)+100)
			n, err := lzo1xDecompress(dst, src)
			if err != nil || !bytes.Equal(dst[:n], want) {
				t.Fatalf("decode: n=%d (want %d) err=%v, first diff at %d", n, len(want), err, firstDiff(dst[:n], want))
			}
			if len(want) > 0 {
				if _, err := lzo1xDecompress(dst[:len(want)-1], src); !errors.Is(err, errLZOOutputOverrun) {
					t.Errorf("one byte too little room: err=%v, want output overrun", err)
				}
			}
			for _, cut := range []int{0, 1, len(src) / 2, len(src) - 3, len(src) - 1} {
				if cut < 0 || cut >= len(src) {
					continue
				}
				if _, err := lzo1xDecompress(dst, src[:cut]); err == nil {
					t.Errorf("stream cut to %d of %d bytes decoded without error", cut, len(src))
				}
			}
			if _, err := lzo1xDecompress(dst, append(append([]byte(nil), src...), 0)); !errors.Is(err, errLZOTrailing) {
				t.Errorf("byte after end marker: err=%v, want trailing error", err)
			}
		})
	}
}

// TestLZO1XHandmade covers instructions and errors by hand-assembled streams.
func TestLZO1XHandmade(t *testing.T) {
	tests := []struct {
		name   string
		stream []byte
		want   string
		err    error
	}{
		{"empty stream", []byte{0x11, 0, 0}, "", nil},
		{"first byte literals", []byte{17 + 3, 'a', 'b', 'c', 0x11, 0, 0}, "abc", nil},
		// 4 literals, then an M2 match of 3 at distance 4 with 2 trailing
		// literals, then a 2-byte M1 (state 2) at distance 1.
		{"M2 then M1 short", []byte{17 + 4, 'w', 'x', 'y', 'z', 0x40 | 3<<2 | 2, 0, 'p', 'q', 0x00, 0x00, 0x11, 0, 0},
			"wxyzwxypqqq", nil},
		// 0000LLLL literal run with extension: 0 then 2 -> 15+2+3 = 20 bytes.
		{"literal run extension", append(append([]byte{17 + 1, 'a', 0x20 | 1, 0, 0, 0x00, 2}, bytes.Repeat([]byte{'b'}, 20)...), 0x11, 0, 0),
			"aaaa" + strings.Repeat("b", 20), nil},
		// M3 with length extension (0 then 1 -> 2+31+1 = 34) at distance 1.
		{"M3 extension", []byte{17 + 1, 'z', 0x20, 1, 0, 0, 0x11, 0, 0}, strings.Repeat("z", 35), nil},
		{"lookbehind", []byte{17 + 1, 'a', 0x40 | 1<<2, 0, 0x11, 0, 0}, "", errLZOLookbehind},
		{"end marker too long", []byte{17 + 1, 'a', 0x12, 0, 0}, "", errLZOEndMarker},
		{"end marker extended", []byte{17 + 1, 'a', 0x10, 1, 0, 0}, "", errLZOEndMarker},
		{"trailing", []byte{0x11, 0, 0, 0}, "", errLZOTrailing},
		{"no end marker", []byte{17 + 2, 'a', 'b'}, "", errLZOInputOverrun},
		{"empty input", nil, "", errLZOInputOverrun},
		{"literals past input", []byte{17 + 9, 'a'}, "", errLZOInputOverrun},
		{"extension runs off", []byte{0, 0, 0, 0}, "", errLZOInputOverrun},
		{"match at start", []byte{0x12, 4, 0, 0x11, 0, 0}, "", errLZOLookbehind},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, 100)
			n, err := lzo1xDecompress(dst, tc.stream)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err == nil && string(dst[:n]) != tc.want {
				t.Fatalf("got %q, want %q", dst[:n], tc.want)
			}
		})
	}
}

// TestLZO1XEncoder round-trips the encoder on many inputs and checks every
// stream stays inside the kernel's per-segment bound.
func TestLZO1XEncoder(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 0))
	var table lzoTable
	check := func(src []byte) {
		t.Helper()
		enc := lzo1xCompress(nil, src, &table)
		if len(enc) > lzoWorstCase(len(src)) {
			t.Fatalf("%d bytes encoded to %d, above worst case %d", len(src), len(enc), lzoWorstCase(len(src)))
		}
		dst := make([]byte, len(src))
		n, err := lzo1xDecompress(dst, enc)
		if err != nil || n != len(src) || !bytes.Equal(dst, src) {
			t.Fatalf("round trip of %d bytes: n=%d err=%v diff at %d", len(src), n, err, firstDiff(dst[:n], src))
		}
	}
	for _, name := range vectorInputs {
		check(inputFromName(t, name))
	}
	for _, n := range []int{0, 1, 2, 3, 4, 5, 238, 239, 240, 255, 256, 4095, 4096, 4097, 65536} {
		for _, kind := range []string{"text", "random", "zeros", "mixed", "repeat", "short"} {
			check(genInput(kind, 1, n))
		}
	}
	// Far matches: every M4 distance region, and lengths around each
	// length-field limit (M2 8, M3 33, M4 9, and 255-extension steps).
	for _, dist := range []int{1, 2048, 2049, 16384, 16385, 32768, 32769, lzoMaxDist, lzoMaxDist + 1} {
		for _, m := range []int{4, 8, 9, 33, 34, 288, 289, 600} {
			pre := genRandom(uint64(dist), dist)
			check(append(append(pre, pre[:min(m, dist)]...), 'x'))
		}
	}
	for range 300 {
		check(randomInput(r, 70000))
	}
}

// lzoFrameOffsets walks a frame written by compressLZO and returns the offset
// of every segment header; it fails the test on any framing violation.
func lzoFrameOffsets(t *testing.T, frame []byte, sectorSize int) []int {
	t.Helper()
	total := int(binary.LittleEndian.Uint32(frame))
	if total != len(frame) {
		t.Fatalf("total length %d, frame is %d bytes", total, len(frame))
	}
	var offs []int
	for pos := 4; pos < total; {
		if pos%sectorSize > sectorSize-4 {
			t.Fatalf("segment header at %d straddles a sector boundary", pos)
		}
		offs = append(offs, pos)
		pos += 4 + int(binary.LittleEndian.Uint32(frame[pos:]))
		if left := sectorSize - pos%sectorSize; left < 4 {
			if !bytes.Equal(frame[pos:pos+left], make([]byte, left)) {
				t.Fatalf("padding at %d is not zero", pos)
			}
			pos += left
		}
	}
	return offs
}

// TestLZOFraming checks the writer's framing rules and that the reader
// follows a header moved past zero padding. Small sectors make padding
// frequent; the test insists it happened.
func TestLZOFraming(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 0))
	pads := 0
	for _, ss := range []int{512, 4096, 16384, 65536} {
		for range 60 {
			src := randomInput(r, MaxUncompressed)
			frame := compressLZO(src, ss)
			offs := lzoFrameOffsets(t, frame, ss)
			if want := (len(src) + ss - 1) / ss; len(offs) != want {
				t.Fatalf("%d segments for %d bytes, want %d", len(offs), len(src), want)
			}
			for i := 1; i < len(offs); i++ {
				if offs[i]%ss == 0 && offs[i-1]+4+int(binary.LittleEndian.Uint32(frame[offs[i-1]:])) != offs[i] {
					pads++
				}
			}
			if len(frame) > MaxCompressed {
				continue // incompressible: never stored compressed
			}
			padded := append(frame, make([]byte, roundUp(len(frame), ss)-len(frame))...)
			dst := make([]byte, roundUp(len(src), ss))
			if err := Decompress(LZO, dst, padded, ss); err != nil || !bytes.Equal(dst[:len(src)], src) {
				t.Fatalf("sector %d, %d bytes: err=%v diff at %d", ss, len(src), err, firstDiff(dst, src))
			}
		}
	}
	if pads == 0 {
		t.Fatal("no segment needed padding; the test does not exercise the rule")
	}
	t.Logf("%d padded segment headers", pads)
}

// lzoFrame assembles a btrfs LZO frame from raw segments without padding
// rules, for building hostile inputs.
func lzoFrame(total int, segs ...[]byte) []byte {
	out := make([]byte, 4)
	for _, s := range segs {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	if total < 0 {
		total = len(out)
	}
	binary.LittleEndian.PutUint32(out, uint32(total))
	return out
}

// TestLZOReaderChecks enforces the kernel reader's limits.
func TestLZOReaderChecks(t *testing.T) {
	var table lzoTable
	seg := lzo1xCompress(nil, genText(1, 4096), &table)
	big := lzo1xCompress(nil, make([]byte, 4097), &table) // decodes past one sector
	ok := lzoFrame(-1, seg)
	huge := bytes.Repeat([]byte{0}, lzoWorstCase(4096)+1)
	tests := []struct {
		name string
		src  []byte
	}{
		{"short header", []byte{1, 0, 0}},
		{"total below header", append([]byte{3, 0, 0, 0}, ok[4:]...)},
		{"total beyond extent", lzoFrame(len(ok)+1, seg)},
		{"total beyond 128K", append(lzoFrame(MaxCompressed+1, seg), make([]byte, MaxCompressed)...)},
		{"sectors beyond total", append(lzoFrame(-1, seg), make([]byte, 8192)...)},
		{"segment beyond total", lzoFrame(len(ok)-1, seg)[:len(ok)-1]},
		{"segment above worst case", lzoFrame(-1, huge)},
		{"segment decodes past a sector", lzoFrame(-1, big)},
		{"header past total", lzoFrame(len(ok)+2, seg, nil)[:len(ok)+2]},
		{"bad segment", lzoFrame(-1, []byte{0x12, 4, 0, 0x11, 0, 0})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// dst larger than the content, so every segment must be read.
			err := Decompress(LZO, make([]byte, 3*4096), tc.src, 4096)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			t.Log(err)
		})
	}
	// The valid frame, and the same padded to a sector, decode.
	for _, src := range [][]byte{ok, append(ok, make([]byte, 4096-len(ok))...)} {
		dst := make([]byte, 4096)
		if err := Decompress(LZO, dst, src, 4096); err != nil || !bytes.Equal(dst, genText(1, 4096)) {
			t.Fatalf("valid frame of %d bytes: %v", len(src), err)
		}
	}
	// A frame with no segments decodes to zeros; one whose last segment
	// overflows a short dst keeps the prefix.
	dst := []byte{1, 2, 3}
	if err := Decompress(LZO, dst, lzoFrame(-1), 4096); err != nil || !bytes.Equal(dst, []byte{0, 0, 0}) {
		t.Fatalf("empty frame: %v %v", dst, err)
	}
	if err := Decompress(LZO, dst, ok, 4096); err != nil || !bytes.Equal(dst, genText(1, 3)) {
		t.Fatalf("short dst: %q %v", dst, err)
	}
}
