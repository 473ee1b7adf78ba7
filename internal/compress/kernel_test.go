package compress

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Extents written by Linux 6.18 (mount -o compress-force=zlib|lzo|zstd, 4 KiB
// sectors) and read back raw from the image; see testdata/README.md. A
// regular extent's file holds disk_num_bytes bytes (stream plus zero
// padding); an inline extent's file holds the item payload after its 21-byte
// header. The input name says which generated content the file had.
var kernelExtents = []struct {
	file     string // under testdata/kernel
	input    string // kind-seed-size of the file content
	ramBytes int
	typ      Type
}{
	{"text-11-40000.zlib", "text-11-40000", 40960, Zlib},
	{"zeros-0-131072.zlib", "zeros-0-131072", 131072, Zlib},
	{"text-21-3000.zlib", "text-21-3000", 3000, Zlib}, // inline
	{"text-1267-40000.lzo", "text-1267-40000", 40960, LZO},
	{"zeros-0-131072.lzo", "zeros-0-131072", 131072, LZO},
	{"text-22-3000.lzo", "text-22-3000", 3000, LZO}, // inline
	{"text-13-40000.zstd", "text-13-40000", 40960, Zstd},
	{"zeros-0-131072.zstd", "zeros-0-131072", 131072, Zstd},
	{"text-23-3000.zstd", "text-23-3000", 3000, Zstd}, // inline
}

// TestKernelExtents proves Decompress reads what the kernel writes: each
// extent decodes to the file content, and the ram_bytes beyond the end of the
// file (the last extent is sector-rounded) reads as zeros.
func TestKernelExtents(t *testing.T) {
	for _, k := range kernelExtents {
		t.Run(k.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "kernel", k.file))
			if err != nil {
				t.Fatal(err)
			}
			want := inputFromName(t, k.input)
			dst := bytes.Repeat([]byte{0xAA}, k.ramBytes) // stale contents must be overwritten
			if err := Decompress(k.typ, dst, src, 4096); err != nil {
				t.Fatalf("Decompress: %v", err)
			}
			if !bytes.Equal(dst[:len(want)], want) {
				t.Fatalf("decoded data differs from the file content (first diff at %d)", firstDiff(dst, want))
			}
			if i := bytes.IndexFunc(dst[len(want):], func(r rune) bool { return r != 0 }); i >= 0 {
				t.Fatalf("byte %d past the file end is not zero", len(want)+i)
			}
		})
	}
}

// TestKernelExtentShapes pins facts of the kernel's encodings that the
// decoder relies on, so a wrong assumption shows up here first.
func TestKernelExtentShapes(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "kernel", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if z := read("text-11-40000.zlib"); z[0] != 0x78 || z[1] != 0x5E {
		t.Errorf("kernel zlib header = % x, want 78 5e (level 3)", z[:2])
	}
	if z := read("text-13-40000.zstd"); !bytes.HasPrefix(z, []byte{0x28, 0xB5, 0x2F, 0xFD}) || z[4]&0x20 == 0 || z[4]&0x04 != 0 {
		t.Errorf("kernel zstd frame header % x: want magic, single segment, no checksum", z[:5])
	}
	// The 40000-byte LZO extent has a segment ending 3 bytes before a
	// sector boundary, so its next header starts after zero padding.
	lz := read("text-1267-40000.lzo")
	if lz[8189] != 0 || lz[8190] != 0 || lz[8191] != 0 || int(leU32(lz[8192:])) > lzoWorstCase(4096) {
		t.Errorf("expected padding at 8189..8191 and a segment header at 8192")
	}
	// Inline LZO: total length equals the payload size, one segment.
	in := read("text-22-3000.lzo")
	if int(leU32(in)) != len(in) || int(leU32(in[4:])) != len(in)-8 {
		t.Errorf("inline lzo: total %d, segment %d, payload %d", leU32(in), leU32(in[4:]), len(in))
	}
	for _, k := range kernelExtents {
		if !strings.HasSuffix(k.file, "."+k.typ.String()) {
			t.Errorf("%s: extension does not match type %v", k.file, k.typ)
		}
	}
}

func leU32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// firstDiff returns the first index where a and b differ (or the shorter length).
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
