package btrfs

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/alloc"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/compress"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// pieceSize is the file data one compressed extent covers at most
// (format doc §11), and the unit the parallel preparation works in.
const pieceSize = compress.MaxUncompressed

// dataPolicy is how one write stores file data: the inode's flags and
// the filesystem's options decide it before any data is prepared.
type dataPolicy struct {
	comp  compress.Type // None: store as is
	level int
	force bool // compress-force: keep trying even after a piece did not pay
	csum  bool // record data checksums (not NODATASUM)
	ct    disk.CsumType
	ss    uint64
}

// compressionOf parses Options.Compress.
func compressionOf(s string) (compress.Type, error) {
	switch s {
	case "", "no", "none":
		return compress.None, nil
	case "zlib":
		return compress.Zlib, nil
	case "lzo":
		return compress.LZO, nil
	case "zstd":
		return compress.Zstd, nil
	}
	return compress.None, fmt.Errorf("btrfs: unknown compression %q: %w", s, syscall.EINVAL)
}

// basePolicy is the write policy of a file without inode flags, fixed
// when the filesystem is opened: PrepareData uses it from any goroutine.
func basePolicy(o *Options, ct disk.CsumType, ss uint64) (dataPolicy, error) {
	comp, err := compressionOf(o.Compress)
	if err != nil {
		return dataPolicy{}, err
	}
	return dataPolicy{comp: comp, level: o.CompressLevel, force: o.CompressForce, csum: true, ct: ct, ss: ss}, nil
}

// plain is p without compression: the policy of data shared with a
// host file, whose extents must hold the host's bytes as they are.
func (p dataPolicy) plain() dataPolicy {
	p.comp, p.level, p.force = compress.None, 0, false
	return p
}

// policy returns the write policy for in. As the kernel: NODATASUM (and
// so NODATACOW) files are never compressed (compressed extents need
// checksums); NOCOMPRESS stops compression unless compress-force; the
// inode's COMPRESS flag (chattr +c) compresses with the filesystem's
// algorithm, zlib when none is set.
func (fsys *FS) policy(in *winode) (dataPolicy, error) {
	p := fsys.w.base
	p.csum = in.item.Flags&disk.InodeNoDataSum == 0
	if in.item.Flags&disk.InodeCompress != 0 {
		if t, ok := fsys.propCompression(in); ok && t != p.comp {
			p.comp, p.level = t, 0 // the property's algorithm at its default level
		} else if p.comp == compress.None {
			p.comp = compress.Zlib
		}
	}
	switch {
	case !p.csum || in.item.Flags&disk.InodeNoDataCow != 0:
		p.comp = compress.None
	case in.item.Flags&disk.InodeNoCompress != 0 && !p.force:
		p.comp = compress.None
	}
	return p, nil
}

// piece is one prepared part of a write: up to pieceSize file bytes, the
// compressed stream when compression pays, and the checksums of what goes
// to disk.
type piece struct {
	data   []byte // file bytes, whole sectors
	stored []byte // compressed stream padded to a sector, or nil: data is stored
	sums   []byte
	failed bool // compression was tried and did not save a sector
}

// preparePieces cuts buf (whole sectors) into pieces and compresses and
// checksums them on GOMAXPROCS goroutines.
func preparePieces(buf []byte, p dataPolicy) ([]piece, error) {
	n := (len(buf) + pieceSize - 1) / pieceSize
	pieces := make([]piece, n)
	for i := range pieces {
		pieces[i].data = buf[i*pieceSize : min(len(buf), (i+1)*pieceSize)]
	}
	if n == 1 {
		return pieces, pieces[0].prepare(p)
	}
	workers := min(runtime.GOMAXPROCS(0), n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = pieces[i].prepare(p)
			}
		}()
	}
	wg.Wait()
	return pieces, errors.Join(errs...)
}

// prepare compresses (when the policy says so) and checksums one piece.
// Without compress-force, the kernel's heuristic (compress.Worth) first
// judges whether the piece is worth trying: when it is not, the piece is
// stored as is and, as in the kernel, that does not mark the inode
// NOCOMPRESS (only a compression that did not pay does).
func (pc *piece) prepare(p dataPolicy) error {
	if p.comp != compress.None && (p.force || compress.Worth(pc.data)) {
		out, ok, err := compress.Compress(p.comp, pc.data, p.level, int(p.ss))
		if err != nil {
			return err
		}
		if ok {
			pc.stored = make([]byte, roundUpTo(uint64(len(out)), p.ss))
			copy(pc.stored, out)
		} else {
			pc.failed = true
		}
	}
	if p.csum {
		pc.sums = sumSectors(p.ct, pc.onDisk(), p.ss)
	}
	return nil
}

// onDisk is what the piece writes.
func (pc *piece) onDisk() []byte {
	if pc.stored != nil {
		return pc.stored
	}
	return pc.data
}

// sumSectors returns the checksum of every sector of b.
func sumSectors(ct disk.CsumType, b []byte, ss uint64) []byte {
	out := make([]byte, 0, uint64(len(b))/ss*uint64(ct.Size()))
	for o := uint64(0); o < uint64(len(b)); o += ss {
		out = ct.Sum(out, b[o:o+ss])
	}
	return out
}

// storeData writes buf (whole sectors, file bytes from file offset at)
// to new extents and returns their items; references and the items in
// the tree are the caller's (apply), checksums are added here. Compressed
// pieces become one extent each; runs of stored pieces are merged into
// extents of at most disk.MaxExtentSize, split further when free space is
// fragmented. It reports whether some piece did not compress (the kernel
// then marks the inode NOCOMPRESS). pieces, when not nil, are buf's
// pieces prepared under p already (PrepareData).
func (c *wctx) storeData(buf []byte, at uint64, p dataPolicy, pieces []piece, host *hostBytes) ([]extent, bool, error) {
	if pieces == nil {
		var err error
		if pieces, err = preparePieces(buf, p); err != nil {
			return nil, false, err
		}
	}
	var out []extent
	failed := false
	for i := 0; i < len(pieces); {
		if pieces[i].stored != nil {
			e, err := c.storeCompressed(&pieces[i], at+uint64(i*pieceSize), p)
			if err != nil {
				return nil, false, err
			}
			out = append(out, e)
			i++
			continue
		}
		j := i
		var sums []byte
		for j < len(pieces) && pieces[j].stored == nil {
			failed = failed || pieces[j].failed
			sums = append(sums, pieces[j].sums...)
			j++
		}
		start, end := i*pieceSize, min(len(buf), j*pieceSize)
		exts, err := c.storePlain(buf[start:end], sums, at+uint64(start), p, host.from(start))
		if err != nil {
			return nil, false, err
		}
		out = append(out, exts...)
		i = j
	}
	return out, failed, nil
}

// markCompression asks for the incompat bit the kernel sets when it
// writes extents compressed with ct (zlib needs none).
func markCompression(t *txn.Txn, ct compress.Type) {
	var f uint64
	switch ct {
	case compress.LZO:
		f = disk.IncompatCompressLZO
	case compress.Zstd:
		f = disk.IncompatCompressZstd
	default:
		return
	}
	t.SetIncompat(f)
}

// storeCompressed writes one compressed piece as its own extent.
func (c *wctx) storeCompressed(pc *piece, at uint64, p dataPolicy) (extent, error) {
	t := c.t
	markCompression(t, p.comp)
	n := uint64(len(pc.stored))
	addr, err := t.AllocData(n, 0)
	if err != nil {
		return extent{}, err
	}
	if err := c.putData(addr, pc.stored, pc.sums, nil); err != nil {
		return extent{}, err
	}
	l := uint64(len(pc.data))
	return extent{start: at, length: l, fe: disk.FileExtentItem{Generation: c.gen, RAMBytes: l,
		Compression: disk.CompressionType(p.comp), Type: disk.FileExtentReg,
		DiskBytenr: addr, DiskNumBytes: n, NumBytes: l}}, nil
}

// storePlain writes data uncompressed as extents of at most
// disk.MaxExtentSize, halving the size while the allocator has no free
// range that large.
func (c *wctx) storePlain(data, sums []byte, at uint64, p dataPolicy, host *hostBytes) ([]extent, error) {
	t := c.t
	var out []extent
	done := 0
	cs := uint64(p.ct.Size())
	limit := uint64(disk.MaxExtentSize)
	for len(data) > 0 {
		n := min(uint64(len(data)), limit)
		addr, err := t.AllocData(n, 0)
		if errors.Is(err, alloc.ErrNoSpace) && n > p.ss {
			limit = max(p.ss, roundDownTo(n/2, p.ss))
			continue
		}
		if err != nil {
			return nil, err
		}
		var s []byte
		if p.csum {
			s, sums = sums[:n/p.ss*cs], sums[n/p.ss*cs:]
		}
		if err := c.putData(addr, data[:n], s, host.from(done)); err != nil {
			return nil, err
		}
		out = append(out, extent{start: at, length: n, fe: disk.FileExtentItem{Generation: c.gen, RAMBytes: n,
			Type: disk.FileExtentReg, DiskBytenr: addr, DiskNumBytes: n, NumBytes: n}})
		data, at, done = data[n:], at+n, done+int(n)
	}
	return out, nil
}

// putData writes b at addr and records its checksums (none for
// NODATASUM files). The whole sectors of b that host says are a host
// file's bytes are shared with it (Txn.WriteDataShared) rather than
// written; a partial sector at their end is written, as the host can
// clone only whole blocks (a range ending at the source's end of file
// may be partial, but only when it also ends the destination, which a
// range inside an image never does).
func (c *wctx) putData(addr disk.LogicalAddr, b, sums []byte, host *hostBytes) error {
	t := c.t
	k := 0
	if host != nil {
		k = int(roundDownTo(uint64(min(len(b), host.n)), c.fsys.w.base.ss))
	}
	if k > 0 {
		if err := t.WriteDataShared(addr, b[:k], host.src); err != nil {
			return err
		}
	}
	if k < len(b) {
		if err := t.WriteData(addr+disk.LogicalAddr(k), b[k:]); err != nil {
			return err
		}
	}
	if len(sums) == 0 {
		return nil
	}
	return t.AddCsums(addr, sums)
}

// hostBytes says that the first n bytes of a buffer being stored are
// also those of the host file range src (PrepareShared), so they may be
// shared with it instead of written.
type hostBytes struct {
	src blockdev.HostRange
	n   int
}

// from is h for the same buffer from byte k on: nil when no host bytes
// are left (h nil included).
func (h *hostBytes) from(k int) *hostBytes {
	if h == nil || k >= h.n {
		return nil
	}
	return &hostBytes{src: blockdev.HostRange{File: h.src.File, Off: h.src.Off + int64(k)}, n: h.n - k}
}
