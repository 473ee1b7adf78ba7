package btrfs

import (
	"bytes"
	"io/fs"
	"os"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/compress"
)

// PreparedData is file data whose compression and checksums were worked
// out before the write that stores it. They are the costly part of
// writing data, and changes run one at a time: a caller with many files
// (mkfs) prepares the next ones on other goroutines while the current
// one is written, and so uses every core.
//
// Preparing assumes a file without inode flags (the filesystem's
// compression options) written at a sector-aligned offset past the
// file's last byte, as a new file is. A write for which that does not
// hold is still right: it prepares the data again, under the lock.
type PreparedData struct {
	data   []byte
	pol    dataPolicy
	padded []byte  // data with zeros up to the end of its last sector
	pieces []piece // of padded; nil when the data will be inline

	inlineDone bool   // inline was computed
	inline     []byte // data compressed for an inline extent (nil: did not shrink)

	host *blockdev.HostRange // where data are a host file's bytes (PrepareShared), or nil
}

// PrepareData compresses and checksums p for WritePrepared. It may run
// on any goroutine, also while changes or Commit run; p must not change
// until the write is done. It fails on a read-only FS.
func (fsys *FS) PrepareData(p []byte) (*PreparedData, error) {
	w, err := fsys.writable("prepare", ".")
	if err != nil {
		return nil, err
	}
	return fsys.prepareWith(p, w.base)
}

// PrepareShared is PrepareData for bytes that are also those of the host
// file src from offset srcOff on (p was read from there). WritePrepared
// then stores the whole sectors of p by sharing src's blocks with the
// image (a reflink: FICLONERANGE on Linux) instead of writing them,
// where the image file and src lie on one host filesystem that clones
// and the offsets fall on its block boundaries; it writes the rest (the
// partial sector at the end of a file, and everything the host refuses
// to share). Every copy of a DUP or RAID1 chunk shares the same blocks.
// WriteCounters tells the bytes shared from those written.
//
// Data stored so is not compressed (a compressed extent does not hold
// the host's bytes); a file small enough for an inline extent still gets
// one, compressed as any. The checksums come from p, so p must be what
// src holds. src must stay open until the write is done. Only the write
// this prepares shares anything: writing pd at an offset that is not on
// a sector boundary writes it.
func (fsys *FS) PrepareShared(p []byte, src *os.File, srcOff int64) (*PreparedData, error) {
	w, err := fsys.writable("prepare", ".")
	if err != nil {
		return nil, err
	}
	if src == nil || srcOff < 0 {
		return nil, &fs.PathError{Op: "prepare", Path: ".", Err: syscall.EINVAL}
	}
	pd, err := fsys.prepareWith(p, w.base.plain())
	if err != nil {
		return nil, err
	}
	// An inline extent may still be compressed; the write works that out.
	pd.inlineDone, pd.inline = false, nil
	pd.host = &blockdev.HostRange{File: src, Off: srcOff}
	return pd, nil
}

// prepareWith prepares p under policy pol.
func (fsys *FS) prepareWith(p []byte, pol dataPolicy) (*PreparedData, error) {
	w := fsys.w
	var err error
	pd := &PreparedData{data: p, pol: pol}
	if len(p) == 0 {
		return pd, nil
	}
	if uint64(len(p)) < pol.ss && w.maxInline >= 0 {
		if pol.comp != compress.None {
			if pd.inline, err = compressInline(p, pol); err != nil {
				return nil, err
			}
		}
		pd.inlineDone = true
		if len(p) <= w.maxInline || (pd.inline != nil && len(pd.inline) <= w.maxInline) {
			return pd, nil // an inline extent: no pieces
		}
	}
	pd.padded = p
	if r := uint64(len(p)) % pol.ss; r != 0 {
		pd.padded = make([]byte, uint64(len(p))+pol.ss-r)
		copy(pd.padded, p)
	}
	if pd.pieces, err = preparePieces(pd.padded, pol); err != nil {
		return nil, err
	}
	return pd, nil
}

// inlineStream returns content compressed for an inline extent (nil
// when that does not shrink it): what was prepared, when pd (which may
// be nil) was prepared from exactly content, or compressed now.
func (pd *PreparedData) inlineStream(content []byte, pol dataPolicy) ([]byte, error) {
	if pd != nil && pd.inlineDone && bytes.Equal(content, pd.data) {
		return pd.inline, nil
	}
	return compressInline(content, pol)
}

// compressInline compresses content for an inline extent: the stream, or
// nil when it does not come out smaller. The heuristic (compress.Worth)
// is not asked: the kernel asks it about the file's one sector, which is
// mostly the zeros after an inline-sized file, and that practically
// always says yes.
func compressInline(content []byte, pol dataPolicy) ([]byte, error) {
	out, _, err := compress.Compress(pol.comp, content, pol.level, int(pol.ss))
	if err != nil || len(out) >= len(content) {
		return nil, err
	}
	return out, nil
}

// WritePrepared is WriteAt of pd's data: it writes them at offset off of
// the existing regular file name, with what PrepareData computed when it
// applies to this file and offset.
func (fsys *FS) WritePrepared(name string, pd *PreparedData, off int64) (int, error) {
	if pd == nil {
		return 0, &fs.PathError{Op: "write", Path: name, Err: syscall.EINVAL}
	}
	return fsys.writeAtPolicy(name, pd.data, off, pd, nil)
}
