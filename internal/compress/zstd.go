package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstd extents hold one zstd frame followed by zero padding. The reader finds
// the end of the first frame itself (zstdFrame) and decodes only that frame,
// because the library would otherwise take the padding for a second frame and
// fail. Window sizes above 128 KiB are rejected, as the kernel's decoder does.

const (
	zstdMagic     = 0xFD2FB528
	zstdMaxWindow = 128 << 10 // ZSTD_BTRFS_MAX_WINDOWLOG 17
	zstdMaxBlock  = 128 << 10 // Block_Maximum_Size of the format
)

var (
	zstdDecOnce sync.Once
	zstdDec     *zstd.Decoder
	zstdDecErr  error

	// zstdStreams pools single-goroutine streaming decoders for frames whose
	// size is unknown or larger than dst, which are decoded only up to
	// len(dst).
	zstdStreams sync.Pool // *zstd.Decoder

	// zstdEncs holds one encoder per speed class (index is zstd.EncoderLevel);
	// each is safe for concurrent EncodeAll and keeps its own pool of states.
	zstdEncOnce [zstd.SpeedBestCompression + 1]sync.Once
	zstdEncs    [zstd.SpeedBestCompression + 1]*zstd.Encoder
	zstdEncErrs [zstd.SpeedBestCompression + 1]error
)

// zstdDecoderOptions bound what a hostile frame can make the decoder
// allocate: the kernel's window limit, and no output beyond cap(dst).
func zstdDecoderOptions(concurrency int) []zstd.DOption {
	return []zstd.DOption{
		zstd.WithDecoderConcurrency(concurrency),
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecodeBuffersBelow(0),
	}
}

// sharedZstdDecoder returns the process-wide DecodeAll decoder. It runs up to
// GOMAXPROCS decodes at once (more callers wait) and starts no goroutines.
func sharedZstdDecoder() (*zstd.Decoder, error) {
	zstdDecOnce.Do(func() {
		zstdDec, zstdDecErr = zstd.NewReader(nil, zstdDecoderOptions(0)...)
	})
	return zstdDec, zstdDecErr
}

// decompressZstd decodes the first zstd frame of src into dst and returns
// the bytes produced.
func decompressZstd(dst, src []byte) (int, error) {
	frameLen, contentSize, err := zstdFrame(src)
	if err != nil {
		return 0, err
	}
	frame := src[:frameLen]
	if contentSize < 0 || contentSize > len(dst) {
		return zstdDecodePrefix(dst, frame)
	}
	d, err := sharedZstdDecoder()
	if err != nil {
		return 0, err
	}
	// The cap limit keeps the library from growing the output past dst, so
	// it decodes in place.
	out, err := d.DecodeAll(frame, dst[:0:len(dst)])
	if err != nil {
		return 0, corruptf("zstd: %v", err)
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		return copy(dst, out), nil
	}
	return len(out), nil
}

// zstdDecodePrefix decodes frame with a streaming decoder, stopping once dst
// is full, so a frame longer than the caller asked for costs no more memory
// than its window.
func zstdDecodePrefix(dst, frame []byte) (int, error) {
	d, _ := zstdStreams.Get().(*zstd.Decoder)
	if d == nil {
		var err error
		if d, err = zstd.NewReader(nil, zstdDecoderOptions(1)...); err != nil {
			return 0, err
		}
	}
	defer func() {
		_ = d.Reset(nil) // drop the reference to frame
		zstdStreams.Put(d)
	}()
	if err := d.Reset(bytes.NewReader(frame)); err != nil {
		return 0, corruptf("zstd: %v", err)
	}
	n, err := io.ReadFull(d, dst)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return n, corruptf("zstd: at output offset %d: %v", n, err)
	}
	return n, nil
}

// zstdFrame walks the header and block headers of the frame at the start of
// src and returns its length and its declared content size (-1 if absent).
// It does not decode anything, so it costs a few reads per 128 KiB block.
func zstdFrame(src []byte) (frameLen, contentSize int, err error) {
	if len(src) < 5 || binary.LittleEndian.Uint32(src) != zstdMagic {
		return 0, 0, corruptf("zstd: no frame magic at offset 0 (%d bytes)", len(src))
	}
	fhd := src[4]
	if fhd&0x08 != 0 {
		return 0, 0, corruptf("zstd: reserved bit set in frame header descriptor %#02x", fhd)
	}
	single := fhd&0x20 != 0
	pos := 5
	if !single {
		pos++ // window descriptor
	}
	pos += [4]int{0, 1, 2, 4}[fhd&3] // dictionary id
	fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
	if fcsLen == 0 && single {
		fcsLen = 1
	}
	if len(src)-pos < fcsLen {
		return 0, 0, corruptf("zstd: frame header truncated (%d bytes)", len(src))
	}
	contentSize = -1
	if fcsLen > 0 {
		var b [8]byte
		copy(b[:], src[pos:pos+fcsLen])
		v := binary.LittleEndian.Uint64(b[:])
		if fcsLen == 2 {
			v += 256
		}
		if v <= MaxUncompressed*64 { // anything larger is decoded as "unknown"
			contentSize = int(v)
		}
	}
	pos += fcsLen
	for {
		if len(src)-pos < 3 {
			return 0, 0, corruptf("zstd: block header at offset %d truncated", pos)
		}
		h := uint32(src[pos]) | uint32(src[pos+1])<<8 | uint32(src[pos+2])<<16
		size := int(h >> 3)
		if size > zstdMaxBlock {
			return 0, 0, corruptf("zstd: block at offset %d has size %d > %d", pos, size, zstdMaxBlock)
		}
		switch (h >> 1) & 3 {
		case 1: // RLE: one byte repeated size times
			size = 1
		case 3:
			return 0, 0, corruptf("zstd: block at offset %d has reserved type", pos)
		}
		pos += 3
		if len(src)-pos < size {
			return 0, 0, corruptf("zstd: block at offset %d truncated (%d of %d bytes)", pos-3, len(src)-pos, size)
		}
		pos += size
		if h&1 != 0 {
			break
		}
	}
	if fhd&0x04 != 0 {
		if len(src)-pos < 4 {
			return 0, 0, corruptf("zstd: content checksum at offset %d truncated", pos)
		}
		pos += 4
	}
	return pos, contentSize, nil
}

// zstdEncoder returns the shared encoder for a speed class. Frames are single
// segment with the content size and no checksum, like the kernel's, and the
// window never exceeds 128 KiB, so the kernel can read them.
func zstdEncoder(l zstd.EncoderLevel) (*zstd.Encoder, error) {
	zstdEncOnce[l].Do(func() {
		zstdEncs[l], zstdEncErrs[l] = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(l),
			zstd.WithWindowSize(zstdMaxWindow),
			zstd.WithSingleSegment(true),
			zstd.WithEncoderCRC(false),
			zstd.WithZeroFrames(true),
		)
	})
	return zstdEncs[l], zstdEncErrs[l]
}

// compressZstd encodes src as one zstd frame at a kernel level (-15..15, 0
// meaning DefaultZstdLevel), mapped onto the encoder's four speed classes.
func compressZstd(src []byte, level int) ([]byte, error) {
	if level == 0 {
		level = DefaultZstdLevel
	}
	if level < -15 || level > 15 {
		return nil, fmt.Errorf("compress: zstd level %d outside -15..15", level)
	}
	l := zstd.SpeedFastest
	if level > 0 {
		l = zstd.EncoderLevelFromZstd(level)
	}
	e, err := zstdEncoder(l)
	if err != nil {
		return nil, err
	}
	return e.EncodeAll(src, make([]byte, 0, len(src)/2+64)), nil
}
