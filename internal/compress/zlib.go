package compress

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"fmt"
	"io"
	"sync"
)

// zlib extents hold one RFC 1950 stream: a 2-byte header, raw deflate data and
// an Adler-32 trailer. Like the kernel, the reader checks the header, inflates
// the deflate data raw and never looks at the trailer, so a missing or garbled
// Adler-32 after complete data is accepted.

// flateReader is a pooled raw-deflate reader with the byte reader it reads
// from (a *bytes.Reader is an io.ByteReader, so flate adds no buffering).
type flateReader struct {
	src bytes.Reader
	r   io.ReadCloser
}

var flatePool = sync.Pool{New: func() any {
	f := new(flateReader)
	f.r = flate.NewReader(&f.src)
	return f
}}

// zlibWriters pools one writer per level (index 1..9); building a deflate
// compressor allocates several hundred KiB, so they must be reused.
var zlibWriters [10]sync.Pool

// decompressZlib decodes a zlib extent into dst and returns the bytes
// produced. It succeeds when dst fills up or the final deflate block ends,
// whichever comes first (as the kernel's zlib_decompress_bio does), and fails
// if the deflate data is invalid or ends early.
func decompressZlib(dst, src []byte) (int, error) {
	if err := checkZlibHeader(src); err != nil {
		return 0, err
	}
	f := flatePool.Get().(*flateReader)
	defer func() {
		f.src.Reset(nil) // drop the reference to src
		flatePool.Put(f)
	}()
	f.src.Reset(src[2:])
	if err := f.r.(flate.Resetter).Reset(&f.src, nil); err != nil {
		return 0, corruptf("zlib: %v", err)
	}
	n := 0
	for n < len(dst) {
		m, err := f.r.Read(dst[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			// io.ErrUnexpectedEOF (data ends early) or a
			// flate.CorruptInputError (offset into the deflate data).
			return n, corruptf("zlib: deflate data, output offset %d: %v", n, err)
		}
		if m == 0 {
			// flate never returns (0, nil) for a non-empty buffer; guard
			// against looping forever should that change.
			return n, corruptf("zlib: decoder made no progress at output offset %d", n)
		}
	}
	return n, nil
}

// checkZlibHeader validates the 2-byte zlib header the way the kernel decides
// it can skip it: method 8 (deflate), window at most 32 KiB, no preset
// dictionary, and the header check bits making the pair a multiple of 31.
func checkZlibHeader(src []byte) error {
	if len(src) < 2 {
		return corruptf("zlib: %d bytes, too short for the stream header", len(src))
	}
	cmf, flg := src[0], src[1]
	switch {
	case cmf&0x0f != 8:
		return corruptf("zlib: header %02x %02x: compression method %d, want 8 (deflate)", cmf, flg, cmf&0x0f)
	case cmf>>4 > 7:
		return corruptf("zlib: header %02x %02x: window size 2^%d exceeds 32 KiB", cmf, flg, cmf>>4+8)
	case (uint(cmf)<<8|uint(flg))%31 != 0:
		return corruptf("zlib: header %02x %02x: check bits wrong", cmf, flg)
	case flg&0x20 != 0:
		return corruptf("zlib: header %02x %02x: preset dictionary not supported", cmf, flg)
	}
	return nil
}

// compressZlib encodes src as a complete zlib stream (with Adler-32, as the
// kernel writes it) at the given level, 0 meaning DefaultZlibLevel.
func compressZlib(src []byte, level int) ([]byte, error) {
	if level == 0 {
		level = DefaultZlibLevel
	}
	if level < 1 || level > 9 {
		return nil, fmt.Errorf("compress: zlib level %d outside 1..9", level)
	}
	var buf bytes.Buffer
	buf.Grow(len(src)/2 + 64)
	w, _ := zlibWriters[level].Get().(*zlib.Writer)
	if w == nil {
		var err error
		if w, err = zlib.NewWriterLevel(&buf, level); err != nil {
			return nil, err
		}
	} else {
		w.Reset(&buf)
	}
	defer func() {
		w.Reset(io.Discard)
		zlibWriters[level].Put(w)
	}()
	if _, err := w.Write(src); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
