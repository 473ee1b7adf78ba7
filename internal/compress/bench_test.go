package compress

import (
	"fmt"
	"testing"
)

// Throughput of one 128 KiB extent (the kernel's unit) per operation, on
// compressible text and on incompressible data. Bytes/s count uncompressed
// bytes.

var benchInputs = []string{"text", "random"}

func BenchmarkDecompress(b *testing.B) {
	for _, typ := range codecs {
		for _, kind := range benchInputs {
			src := genInput(kind, 1, MaxUncompressed)
			out, _, err := Compress(typ, src, 0, 4096)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, len(src))
			b.Run(fmt.Sprintf("%v/%s", typ, kind), func(b *testing.B) {
				if typ == LZO && len(out) > MaxCompressed {
					b.Skip("incompressible LZO output exceeds the extent limit and is never stored")
				}
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				for b.Loop() {
					if err := Decompress(typ, dst, out, 4096); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(out))/float64(len(src)), "ratio")
			})
		}
	}
}

func BenchmarkCompress(b *testing.B) {
	for _, typ := range codecs {
		for _, kind := range benchInputs {
			src := genInput(kind, 1, MaxUncompressed)
			b.Run(fmt.Sprintf("%v/%s", typ, kind), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := Compress(typ, src, 0, 4096); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDecompressParallel measures the shared pools under contention.
func BenchmarkDecompressParallel(b *testing.B) {
	for _, typ := range codecs {
		src := genText(1, MaxUncompressed)
		out, _, _ := Compress(typ, src, 0, 4096)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.RunParallel(func(pb *testing.PB) {
				dst := make([]byte, len(src))
				for pb.Next() {
					if err := Decompress(typ, dst, out, 4096); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
