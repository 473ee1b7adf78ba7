package disk

import "fmt"

// Sizes of struct btrfs_file_extent_item.
const (
	// FileExtentInlineDataStart is where inline data begins (the header
	// shared by every extent type).
	FileExtentInlineDataStart = 21
	// FileExtentItemSize is the size of a REG or PREALLOC extent item.
	FileExtentItemSize = 53
	// MaxExtentSize is BTRFS_MAX_EXTENT_SIZE, the kernel's cap on one
	// uncompressed data extent (policy, not format).
	MaxExtentSize = 128 << 20
	// MaxCompressedExtentSize caps the decoded size of one compressed extent.
	MaxCompressedExtentSize = 128 << 10
)

// FileExtentType says how a file extent stores its data.
type FileExtentType uint8

// File extent types (BTRFS_FILE_EXTENT_*).
const (
	FileExtentInline   FileExtentType = 0 // data inside the item
	FileExtentReg      FileExtentType = 1 // data in an extent on disk (or a hole if DiskBytenr == 0)
	FileExtentPrealloc FileExtentType = 2 // allocated but unwritten, reads as zeros
	fileExtentTypes                   = 3
)

// String prints the name dump-tree uses after the number: inline, regular, prealloc.
func (t FileExtentType) String() string {
	switch t {
	case FileExtentInline:
		return "inline"
	case FileExtentReg:
		return "regular"
	case FileExtentPrealloc:
		return "prealloc"
	}
	return fmt.Sprintf("unknown.%d", uint8(t))
}

// CompressionType is the compression byte of a file extent.
type CompressionType uint8

// Compression types (BTRFS_COMPRESS_*).
const (
	CompressNone CompressionType = 0
	CompressZlib CompressionType = 1
	CompressLZO  CompressionType = 2
	CompressZstd CompressionType = 3
	// compressTypes is BTRFS_NR_COMPRESS_TYPES: values at or above are invalid.
	compressTypes = 4
)

// String prints none, zlib, lzo or zstd.
func (c CompressionType) String() string {
	switch c {
	case CompressNone:
		return "none"
	case CompressZlib:
		return "zlib"
	case CompressLZO:
		return "lzo"
	case CompressZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown.%d", uint8(c))
}

// Valid reports whether c is a known algorithm.
func (c CompressionType) Valid() bool { return c < compressTypes }

// FileExtentItem is struct btrfs_file_extent_item: the payload of an
// EXTENT_DATA item, key (ino, EXTENT_DATA, file offset). INLINE extents are
// 21 bytes + data; REG and PREALLOC extents are 53 bytes.
type FileExtentItem struct {
	Generation    Generation      // 0x00 transid that wrote the data
	RAMBytes      uint64          // 0x08 decoded size of the whole extent
	Compression   CompressionType // 0x10
	Encryption    uint8           // 0x11 always 0
	OtherEncoding uint16          // 0x12 always 0
	Type          FileExtentType  // 0x14

	// InlineData is the stored (possibly compressed) data of an INLINE
	// extent, from 0x15 to the end of the item.
	InlineData []byte

	// REG and PREALLOC fields.
	DiskBytenr   LogicalAddr // 0x15 start of the disk extent; 0 = hole
	DiskNumBytes uint64      // 0x1d length of the disk extent
	Offset       uint64      // 0x25 offset into the decoded extent
	NumBytes     uint64      // 0x2d file bytes covered
}

// Size is the encoded item size: 21 + len(InlineData) for INLINE, else 53.
func (fe *FileExtentItem) Size() int {
	if fe.Type == FileExtentInline {
		return FileExtentInlineDataStart + len(fe.InlineData)
	}
	return FileExtentItemSize
}

// Decode reads a file extent item. For INLINE extents every byte of b after
// the header is inline data (copied); otherwise b must hold 53 bytes.
func (fe *FileExtentItem) Decode(b []byte) error {
	if len(b) < FileExtentInlineDataStart {
		return shortErr("file extent item", len(b), FileExtentInlineDataStart)
	}
	*fe = FileExtentItem{
		Generation:    Generation(le.Uint64(b)),
		RAMBytes:      le.Uint64(b[0x08:]),
		Compression:   CompressionType(b[0x10]),
		Encryption:    b[0x11],
		OtherEncoding: le.Uint16(b[0x12:]),
		Type:          FileExtentType(b[0x14]),
	}
	switch fe.Type {
	case FileExtentInline:
		fe.InlineData = cloneTight(b[FileExtentInlineDataStart:])
		return nil
	case FileExtentReg, FileExtentPrealloc:
	default:
		return Corruptf("file extent item: unknown type %d", fe.Type)
	}
	if len(b) < FileExtentItemSize {
		return shortErr("file extent item", len(b), FileExtentItemSize)
	}
	fe.DiskBytenr = LogicalAddr(le.Uint64(b[0x15:]))
	fe.DiskNumBytes = le.Uint64(b[0x1d:])
	fe.Offset = le.Uint64(b[0x25:])
	fe.NumBytes = le.Uint64(b[0x2d:])
	return nil
}

// Encode writes fe into b, which must hold fe.Size() bytes.
func (fe *FileExtentItem) Encode(b []byte) {
	_ = b[fe.Size()-1]
	le.PutUint64(b, uint64(fe.Generation))
	le.PutUint64(b[0x08:], fe.RAMBytes)
	b[0x10] = byte(fe.Compression)
	b[0x11] = fe.Encryption
	le.PutUint16(b[0x12:], fe.OtherEncoding)
	b[0x14] = byte(fe.Type)
	if fe.Type == FileExtentInline {
		copy(b[FileExtentInlineDataStart:], fe.InlineData)
		return
	}
	le.PutUint64(b[0x15:], uint64(fe.DiskBytenr))
	le.PutUint64(b[0x1d:], fe.DiskNumBytes)
	le.PutUint64(b[0x25:], fe.Offset)
	le.PutUint64(b[0x2d:], fe.NumBytes)
}

// IsHole reports a REG extent that stores nothing (disk_bytenr 0).
func (fe *FileExtentItem) IsHole() bool {
	return fe.Type == FileExtentReg && fe.DiskBytenr == 0
}

// Len is the number of file bytes the extent covers starting at its key
// offset: NumBytes for REG/PREALLOC, RAMBytes for INLINE.
func (fe *FileExtentItem) Len() uint64 {
	if fe.Type == FileExtentInline {
		return fe.RAMBytes
	}
	return fe.NumBytes
}

// End returns the file offset just past the extent whose key offset is
// start, as the tree-checker computes it: inline extents are rounded up to
// the sector size. ok is false if the end overflows.
func (fe *FileExtentItem) End(start uint64, sectorSize uint32) (end uint64, ok bool) {
	n := fe.Len()
	if fe.Type == FileExtentInline && sectorSize != 0 {
		n = roundUp(n, uint64(sectorSize))
		if n < fe.RAMBytes {
			return 0, false
		}
	}
	end = start + n
	return end, end >= start
}

// String prints the fields, one line, with the words dump-tree uses.
func (fe *FileExtentItem) String() string {
	if fe.Type == FileExtentInline {
		return fmt.Sprintf("generation %d type %d (%v) inline extent data size %d ram_bytes %d compression %d (%v)",
			fe.Generation, fe.Type, fe.Type, len(fe.InlineData), fe.RAMBytes, fe.Compression, fe.Compression)
	}
	return fmt.Sprintf("generation %d type %d (%v) disk byte %d nr %d offset %d nr %d ram %d compression %d (%v)",
		fe.Generation, fe.Type, fe.Type, fe.DiskBytenr, fe.DiskNumBytes, fe.Offset, fe.NumBytes,
		fe.RAMBytes, fe.Compression, fe.Compression)
}

// roundUp rounds v up to a multiple of align (a power of two or any
// non-zero value); it wraps on overflow, which callers check.
func roundUp(v, align uint64) uint64 {
	if align == 0 {
		return v
	}
	return (v + align - 1) / align * align
}
