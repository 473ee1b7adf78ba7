package btrfs

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/gobtrfs/btrfs/internal/compress"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// maxCompressedRAM is the most file data one compressed extent may hold
// (BTRFS_MAX_UNCOMPRESSED); anything larger is corrupt, which also bounds
// what decompression allocates.
const maxCompressedRAM = 128 << 10

// dataView is where file bytes and their checksums are read from: the
// read side's current state (FS.dataView), or a running transaction's
// for a change that reads file data (wctx.readExtents), which so never
// re-points the read side in the middle of a change.
type dataView struct {
	fsys     *FS
	blocks   ctree.Reader  // tree blocks, for the csum tree
	csumRoot ctree.Root    // zero: no csum tree
	data     logicalReader // file data
	cache    *extentCache  // decoded compressed extents; nil: none
}

// dataView is the read side's view; the caller holds the read lock.
func (fsys *FS) dataView() *dataView {
	return &dataView{fsys: fsys, blocks: fsys.blocks, csumRoot: fsys.csumRoot, data: fsys.data, cache: fsys.ext}
}

// readExtent fills dst with the file bytes starting at file offset off,
// which lie inside extent e.
func (v *dataView) readExtent(in *inode, e *extent, dst []byte, off uint64, ra *readahead) error {
	fe := &e.fe
	rel := off - e.start
	switch {
	case fe.Type == disk.FileExtentInline:
		data := fe.InlineData
		if fe.Compression != disk.CompressNone {
			var err error
			if data, err = v.decompress(in, e, fe.InlineData, fe.RAMBytes); err != nil {
				return err
			}
		}
		n := 0
		if rel < uint64(len(data)) {
			n = copy(dst, data[rel:])
		}
		clear(dst[n:])
		return nil
	case fe.Type == disk.FileExtentPrealloc || fe.DiskBytenr == 0:
		clear(dst)
		return nil
	case fe.Compression != disk.CompressNone:
		data, err := v.compressedExtent(in, e)
		if err != nil {
			return err
		}
		pos := fe.Offset + rel
		n := 0
		if pos < uint64(len(data)) {
			n = copy(dst, data[pos:])
		}
		clear(dst[n:])
		return nil
	}
	if ra != nil && len(dst) < readaheadSize {
		return v.readAhead(in, e, dst, fe.Offset+rel, ra)
	}
	return v.readPlain(in, fe, dst, fe.Offset+rel)
}

// readaheadSize is the window a small read of an uncompressed extent
// fetches and verifies at once, so that reading a file in small pieces
// costs one device read and one checksum pass per window.
const readaheadSize = 128 << 10

// readahead is a File's window of verified extent bytes.
type readahead struct {
	mu    sync.Mutex
	ver   uint64           // FS version the window was read at
	start disk.LogicalAddr // logical address of data[0]
	data  []byte
}

// readAhead serves dst (extent bytes at pos) from the window, refilling it
// with up to readaheadSize bytes of the extent when dst is outside.
func (v *dataView) readAhead(in *inode, e *extent, dst []byte, pos uint64, ra *readahead) error {
	fsys := v.fsys
	fe := &e.fe
	logical := fe.DiskBytenr + disk.LogicalAddr(pos)
	ra.mu.Lock()
	defer ra.mu.Unlock()
	// After a change the window's addresses may hold other data (freed
	// extents are reused), so it is only good for the version it was
	// read at.
	if ver := fsys.version(); ra.ver != ver {
		ra.ver, ra.data = ver, ra.data[:0]
	}
	if logical < ra.start || logical+disk.LogicalAddr(len(dst)) > ra.start+disk.LogicalAddr(len(ra.data)) {
		ss := uint64(fsys.sb.SectorSize)
		a := uint64(logical) / ss * ss
		// The window ends at the end of the extent's referenced range.
		end := uint64(fe.DiskBytenr) + fe.Offset + fe.NumBytes
		end = (end + ss - 1) / ss * ss
		b := min(a+readaheadSize, end)
		if b < uint64(logical)+uint64(len(dst)) {
			return v.readPlain(in, fe, dst, pos)
		}
		if cap(ra.data) < int(b-a) {
			ra.data = make([]byte, b-a)
		}
		ra.data = ra.data[:b-a]
		if err := v.readData(in, ra.data, disk.LogicalAddr(a)); err != nil {
			ra.data = ra.data[:0]
			return err
		}
		ra.start = disk.LogicalAddr(a)
	}
	copy(dst, ra.data[logical-ra.start:])
	return nil
}

// readPlain reads uncompressed extent bytes starting at pos within the
// extent, reading whole sectors so each can be checked against its csum.
func (v *dataView) readPlain(in *inode, fe *disk.FileExtentItem, dst []byte, pos uint64) error {
	fsys := v.fsys
	ss := uint64(fsys.sb.SectorSize)
	logical := uint64(fe.DiskBytenr) + pos
	a := logical / ss * ss
	b := (logical + uint64(len(dst)) + ss - 1) / ss * ss
	var buf []byte
	if a == logical && b == logical+uint64(len(dst)) {
		buf = dst
	} else {
		buf = make([]byte, b-a)
	}
	if err := v.readData(in, buf, disk.LogicalAddr(a)); err != nil {
		return err
	}
	if &buf[0] != &dst[0] {
		copy(dst, buf[logical-a:])
	}
	return nil
}

// compressedExtent returns the decoded bytes of a compressed extent,
// through a small cache so sequential reads decode each extent once.
func (v *dataView) compressedExtent(in *inode, e *extent) ([]byte, error) {
	fsys := v.fsys
	fe := &e.fe
	key := extentKey{fe.DiskBytenr, fe.DiskNumBytes}
	if data := v.cache.get(key); data != nil {
		return data, nil
	}
	if fe.DiskNumBytes == 0 || fe.DiskNumBytes > maxCompressedRAM || fe.DiskNumBytes%uint64(fsys.sb.SectorSize) != 0 {
		return nil, fsys.extentCorrupt(in, e, fmt.Sprintf("compressed extent of %d bytes on disk", fe.DiskNumBytes))
	}
	raw := make([]byte, fe.DiskNumBytes)
	if err := v.readData(in, raw, fe.DiskBytenr); err != nil {
		return nil, err
	}
	data, err := v.decompress(in, e, raw, fe.RAMBytes)
	if err != nil {
		return nil, err
	}
	v.cache.put(key, data)
	return data, nil
}

// decompress decodes src into ram bytes.
func (v *dataView) decompress(in *inode, e *extent, src []byte, ram uint64) ([]byte, error) {
	fsys := v.fsys
	if ram > maxCompressedRAM {
		return nil, fsys.extentCorrupt(in, e, fmt.Sprintf("compressed extent holds %d bytes", ram))
	}
	out := make([]byte, ram)
	if err := compress.Decompress(compress.Type(e.fe.Compression), out, src, int(fsys.sb.SectorSize)); err != nil {
		return nil, fsys.extentCorrupt(in, e, fmt.Sprintf("%s data: %v", e.fe.Compression, err))
	}
	return out, nil
}

func (fsys *FS) extentCorrupt(in *inode, e *extent, what string) error {
	k := disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey, Offset: e.start}
	return &disk.CorruptError{Logical: e.fe.DiskBytenr, Tree: in.sv.id, Key: &k, What: what}
}

// readData reads sector-aligned data at logical into buf, verifying every
// sector against the csum tree unless the inode is NODATASUM, and falling
// back to other copies on a mismatch.
func (v *dataView) readData(in *inode, buf []byte, logical disk.LogicalAddr) error {
	fsys := v.fsys
	if in.item.Flags&disk.InodeNoDataSum != 0 || fsys.opts.NoDataChecksums || v.csumRoot.Addr == 0 {
		return v.data.ReadLogical(buf, logical, nil)
	}
	// Bytes the running transaction still holds back (written behind)
	// are its own memory, whose checksums were computed from these very
	// bytes: they are taken as they are, without the csum tree search
	// (through the transaction's blocks, a copy of each) that costs more
	// than the read. A write that continues a partial sector (tar's
	// 10 KiB records) reads that sector back this way every time.
	if tr, ok := v.data.(*txnDataReader); ok && tr.t.ReadStaged(logical, buf) {
		return nil
	}
	ss := uint64(fsys.sb.SectorSize)
	sums, err := v.csums(logical, uint64(len(buf))/ss)
	if err != nil {
		return err
	}
	csize := fsys.sb.CsumType.Size()
	var scratch [disk.CsumFieldSize]byte
	bad := disk.LogicalAddr(0)
	verify := func(at disk.LogicalAddr, b []byte) bool {
		for o := uint64(0); o+ss <= uint64(len(b)); o += ss {
			i := (uint64(at) - uint64(logical) + o) / ss
			want := sums[i*uint64(csize) : (i+1)*uint64(csize)]
			if !bytes.Equal(fsys.sb.CsumType.Sum(scratch[:0], b[o:o+ss]), want) {
				bad = at + disk.LogicalAddr(o)
				return false
			}
		}
		return true
	}
	if err := v.data.ReadLogical(buf, logical, verify); err != nil {
		return &DataError{Subvolume: uint64(in.sv.id), Ino: uint64(in.ino), Logical: uint64(logical), Bad: uint64(bad), Err: err}
	}
	return nil
}

// csums returns the checksums of n sectors starting at logical, from the
// csum tree. A sector without a checksum is corruption (the kernel's
// "csum hole found").
func (v *dataView) csums(logical disk.LogicalAddr, n uint64) ([]byte, error) {
	fsys := v.fsys
	ss := uint64(fsys.sb.SectorSize)
	csize := uint64(fsys.sb.CsumType.Size())
	out := make([]byte, 0, n*csize)
	c := ctree.NewCursor(v.blocks, v.csumRoot)
	pos := uint64(logical)
	end := pos + n*ss
	ok, err := c.SeekLE(disk.Key{ObjectID: disk.ExtentCsumObjectID, Type: disk.ExtentCsumKey, Offset: pos})
	if err == nil && !ok {
		ok, err = c.First()
	}
	for ; ok && err == nil && pos < end; ok, err = c.Next() {
		k := c.Key()
		if k.ObjectID != disk.ExtentCsumObjectID || k.Type != disk.ExtentCsumKey {
			if k.ObjectID > disk.ExtentCsumObjectID {
				break
			}
			continue
		}
		data := c.Data()
		itemEnd := k.Offset + uint64(len(data))/csize*ss
		if itemEnd <= pos {
			continue
		}
		if k.Offset > pos {
			break
		}
		for pos < end && pos < itemEnd {
			i := (pos - k.Offset) / ss
			out = append(out, data[i*csize:(i+1)*csize]...)
			pos += ss
		}
	}
	if err != nil {
		return nil, err
	}
	if pos < end {
		return nil, &disk.CorruptError{Logical: disk.LogicalAddr(pos), Tree: disk.CsumTreeObjectID, What: "csum hole: no checksum for data sector"}
	}
	return out, nil
}
