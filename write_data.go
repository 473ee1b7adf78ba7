package btrfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/chunk"
	"github.com/gobtrfs/btrfs/internal/compress"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// defaultMaxInline is the kernel's max_inline mount option default.
const defaultMaxInline = 2048

// dataChange is change for operations on file data: fn also gets the
// running transaction. change shows the read side the transaction's csum
// tree and new chunks after it (showTxn), so reads verify new data, and
// the committed ones after an abort (showCommitted).
func (fsys *FS) dataChange(op, name string, fn func(c *wctx, t *txn.Txn) (bool, error)) error {
	return fsys.dataChangeKeyed(op, name, nil, fn)
}

// dataChangeFound is the change of a data operation on one inode: by
// key (an open File) or by name.
func (fsys *FS) dataChangeFound(op, name string, key *dirKey, fn func(c *wctx, t *txn.Txn) (bool, error)) error {
	if key == nil {
		return fsys.dataChangeOnInode(op, name, fn)
	}
	return fsys.dataChangeKeyed(op, name, key, fn)
}

// dataChangeOnInode is dataChange of a change that edits the one inode
// name resolves to (changeOnInode).
func (fsys *FS) dataChangeOnInode(op, name string, fn func(c *wctx, t *txn.Txn) (bool, error)) error {
	return fsys.changeWith(op, name, &changeReq{resolve: inodeOf(name), fn: func(c *wctx) (bool, error) {
		return fn(c, c.t)
	}})
}

// dataChangeKeyed is dataChange of a change that edits only inode key,
// when key is set (see changeKeyed).
func (fsys *FS) dataChangeKeyed(op, name string, key *dirKey, fn func(c *wctx, t *txn.Txn) (bool, error)) error {
	return fsys.changeKeyed(op, name, key, func(c *wctx) (bool, error) {
		return fn(c, c.t)
	})
}

// landedReader is a writable FS's reader of committed file data: a commit
// may still be writing its data (txn.Flight) when the read side already
// shows it, so a read first waits until every prepared commit's data is
// on the devices.
type landedReader struct {
	base logicalReader
	tfs  *txn.FS
}

// ReadLogical implements logicalReader.
func (r *landedReader) ReadLogical(p []byte, logical disk.LogicalAddr, verify chunk.VerifyFunc) error {
	if err := r.tfs.LandData(); err != nil {
		return err
	}
	return r.base.ReadLogical(p, logical, verify)
}

// ReadBlock implements logicalReader.
func (r *landedReader) ReadBlock(p []byte, logical disk.LogicalAddr, verify func(b []byte) bool) error {
	return r.base.ReadBlock(p, logical, verify)
}

// txnDataReader is the read side's data reader while a transaction runs:
// addresses the committed chunk map does not know (chunks the transaction
// added) are read through the transaction (one copy, verified once).
type txnDataReader struct {
	base logicalReader
	t    *txn.Txn
}

// ReadLogical implements logicalReader.
func (r *txnDataReader) ReadLogical(p []byte, logical disk.LogicalAddr, verify chunk.VerifyFunc) error {
	// Bytes still written behind are read from memory: a write that
	// continues a partial sector (tar writes 10 KiB records) reads back
	// the sector the write before it left there.
	if r.t.ReadStaged(logical, p) {
		if verify != nil && !verify(logical, p) {
			return &disk.CorruptError{Logical: logical, What: "data written in this transaction fails its checksum"}
		}
		return nil
	}
	if err := r.t.FlushData(); err != nil {
		return err
	}
	err := r.base.ReadLogical(p, logical, verify)
	if !errors.Is(err, chunk.ErrNotMapped) {
		return err
	}
	if err := r.t.ReadData(logical, p); err != nil {
		return err
	}
	if verify != nil && !verify(logical, p) {
		return &disk.CorruptError{Logical: logical, What: "data written in this transaction fails its checksum"}
	}
	return nil
}

// ReadBlock implements logicalReader.
func (r *txnDataReader) ReadBlock(p []byte, logical disk.LogicalAddr, verify func(b []byte) bool) error {
	return r.base.ReadBlock(p, logical, verify)
}

// WriteFile writes data to the regular file name, creating it with
// permission bits perm (owned by root) or truncating it first, like
// os.WriteFile; symlinks are not followed (EINVAL), a directory is
// EISDIR.
func (fsys *FS) WriteFile(name string, data []byte, perm fs.FileMode) error {
	return fsys.dataChange("writefile", name, func(c *wctx, t *txn.Txn) (bool, error) {
		if err := c.checkDataSpace(uint64(len(data))); err != nil {
			return false, err
		}
		in, created, err := c.openOrCreate(name, perm)
		if err != nil {
			return created, err
		}
		if !created {
			if err := mayChange(in, -1); err != nil {
				return false, err
			}
			if err := c.truncate(in, 0); err != nil {
				return true, err
			}
		}
		if err := c.write(in, data, 0, nil); err != nil {
			return true, err
		}
		c.touch(in, c.now(), true)
		return true, c.putInode(in)
	})
}

// openOrCreate resolves the regular file name, or creates it empty.
func (c *wctx) openOrCreate(name string, perm fs.FileMode) (*winode, bool, error) {
	if name == "." {
		return nil, false, syscall.EISDIR
	}
	parent, base, err := c.splitParent(name)
	if err != nil {
		return nil, false, err
	}
	de, err := c.dirEntry(parent.ino, base)
	if err == nil && de == nil {
		err = canAddEntry(parent)
	}
	if err != nil {
		return nil, false, err
	}
	if de != nil {
		in, err := c.regular(de)
		return in, false, err
	}
	for i := 0; i < len(base); i++ {
		if base[i] == 0 {
			return nil, false, syscall.EINVAL
		}
	}
	ino, err := c.newIno()
	if err != nil {
		return nil, false, err
	}
	index, err := c.nextIndex(parent.ino)
	if err != nil {
		return nil, false, err
	}
	if err := c.link(newPlace{parent: parent, base: base, ino: ino, index: index, from: parent}, disk.ModeRegular|UnixMode(perm)&0o7777, nil); err != nil {
		return nil, true, err
	}
	in, err := c.inode(ino)
	return in, true, err
}

// regular loads the inode a directory entry names and checks that it is
// a regular file.
func (c *wctx) regular(de *disk.DirItem) (*winode, error) {
	if de.Location.Type != disk.InodeItemKey {
		return nil, syscall.EISDIR // a subvolume
	}
	in, err := c.inode(de.Location.ObjectID)
	if err != nil {
		return nil, err
	}
	return in, checkRegular(in)
}

// checkRegular refuses what is not a regular file.
func checkRegular(in *winode) error {
	switch {
	case in.item.IsDir():
		return syscall.EISDIR
	case !in.item.IsRegular():
		return syscall.EINVAL
	}
	return nil
}

// mayChange refuses data changes the inode's chattr flags forbid, as
// the kernel: nothing on an IMMUTABLE file, only appends (a write at the
// end; appendAt < 0 for any other change) on an APPEND-only one.
func mayChange(in *winode, appendAt int64) error {
	return mayChangeAt(in, appendAt, int64(in.item.Size))
}

// mayChangeAt is mayChange for a file whose size will be size by then.
func mayChangeAt(in *winode, appendAt, size int64) error {
	switch {
	case in.item.Flags&disk.InodeImmutable != 0:
		return syscall.EPERM
	case in.item.Flags&disk.InodeAppend != 0 && (appendAt < 0 || appendAt != size):
		return syscall.EPERM
	}
	return nil
}

// resolveRegular resolves name to a regular file.
func (c *wctx) resolveRegular(name string) (*winode, error) {
	in, err := c.resolve(name)
	if err != nil {
		return nil, err
	}
	return in, checkRegular(in)
}

// WriteAt writes p at offset off of the existing regular file name,
// extending its size when the write ends past it; the range between the
// old end and off reads as zeros. It returns len(p) or an error.
func (fsys *FS) WriteAt(name string, p []byte, off int64) (int, error) {
	return fsys.writeAtPolicy(name, p, off, nil, nil)
}

// writeAtPolicy is WriteAt with p prepared ahead (pd, or nil), that also
// stores the file's data policy after the write in after (when not nil),
// for the next batch of a stream.
func (fsys *FS) writeAtPolicy(name string, p []byte, off int64, pd *PreparedData, after *dataPolicy) (int, error) {
	return fsys.writeAtFound(name, nil, func(c *wctx) (*winode, error) { return c.resolveRegular(name) }, p, off, pd, after)
}

// writeAtFound is writeAtPolicy with the file found by find: by path, or
// by inode for an open File.
// key, when set, is the one inode find returns (a write through an open
// File): the change may then run in parallel with changes to other
// inodes (writer.runParallel).
func (fsys *FS) writeAtFound(name string, key *dirKey, find func(c *wctx) (*winode, error), p []byte, off int64, pd *PreparedData, after *dataPolicy) (int, error) {
	if err := fsys.writePiecesFound(name, key, find, []WritePiece{{Off: off, Data: p}}, []*PreparedData{pd}, after); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writePiecesFound writes pieces (each prepared ahead in pds[i], or nil)
// in order, in one change, to the file find returns (see writeAtFound).
// Every refusal (a bad offset, the chattr flags, no space for all of
// them) comes before the first piece changes anything.
func (fsys *FS) writePiecesFound(name string, key *dirKey, find func(c *wctx) (*winode, error), pieces []WritePiece, pds []*PreparedData, after *dataPolicy) error {
	var total uint64
	for _, pc := range pieces {
		if pc.Off < 0 || pc.Off+int64(len(pc.Data)) < pc.Off {
			return &fs.PathError{Op: "write", Path: name, Err: syscall.EINVAL}
		}
		total += uint64(len(pc.Data))
	}
	return fsys.dataChangeFound("write", name, key, func(c *wctx, t *txn.Txn) (bool, error) {
		in, err := find(c)
		if err != nil {
			return false, err
		}
		size := int64(in.item.Size) // as each piece finds it
		for _, pc := range pieces {
			if err := mayChangeAt(in, pc.Off, size); err != nil {
				return false, err
			}
			size = max(size, pc.Off+int64(len(pc.Data)))
		}
		if total == 0 {
			return false, nil
		}
		if err := c.checkDataSpace(total); err != nil {
			return false, err
		}
		for i, pc := range pieces {
			if err := c.write(in, pc.Data, uint64(pc.Off), pds[i]); err != nil {
				return true, err
			}
		}
		if after != nil {
			*after, _ = fsys.policy(in)
		}
		c.touch(in, c.now(), true)
		c.logFile = &dirKey{tree: c.tr.Owner(), ino: in.ino}
		return true, c.putInode(in)
	})
}

// noHoles reports the NO_HOLES feature: without it, gaps in files are
// explicit hole items.
func (fsys *FS) noHoles() bool { return fsys.sb.IncompatFlags&disk.IncompatNoHoles != 0 }

// maxInline is the largest file stored in an inline extent, -1 for none:
// the max_inline option, within a sector and one item.
func maxInline(o *Options, sb *disk.Superblock) int {
	n := o.MaxInline
	switch {
	case n < 0:
		return -1
	case n == 0:
		n = defaultMaxInline
	}
	return min(n, int(sb.SectorSize)-1, disk.MaxItemDataSize(int(sb.NodeSize))-disk.FileExtentInlineDataStart)
}

// write puts p at file offset off of in and sets the size; the caller
// touches and stores the inode. Partial sectors are read, merged and
// written anew (copy-on-write: no extent is changed in place). pd, when
// not nil, is p prepared ahead (PrepareData); it is used where the
// policy and the write's alignment are what it was prepared for.
func (c *wctx) write(in *winode, p []byte, off uint64, pd *PreparedData) error {
	fsys := c.fsys
	if len(p) == 0 {
		return nil
	}
	pol, err := fsys.policy(in)
	if err != nil {
		return err
	}
	// Data shared with a host file (PrepareShared) are stored as they
	// are: dpol is pol without compression then. Inline extents and the
	// one uninline makes are not shared and keep pol.
	dpol := pol
	var host *hostBytes
	if pd != nil && pd.host != nil {
		dpol = pol.plain()
		host = &hostBytes{src: *pd.host, n: len(p)}
	}
	if pd != nil && pd.pol != dpol {
		pd = nil
	}
	ss := pol.ss
	end := off + uint64(len(p))
	oldSize := in.item.Size
	newSize := max(oldSize, end)
	if done, err := c.tryInline(in, pol, newSize, func(b []byte) { copy(b[off:], p) }, pd); done || err != nil {
		return err
	}
	if err := c.uninline(in, pol); err != nil {
		return err
	}
	a, b := roundDownTo(off, ss), roundUpTo(end, ss)
	if a != off {
		host = nil // the buffer starts with bytes read from the file, not p
	}
	if pd != nil && pd.pieces != nil && a == off && (b == end || b-ss >= oldSize) {
		// The prepared pieces hold p with zeros after it to the sector's
		// end, which is what the file holds there too.
		return c.replaceData(in, pd.padded, a, dpol, newSize, pd.pieces, host)
	}
	buf := p
	if a != off || b != end {
		buf = make([]byte, b-a)
		headRead := false
		if off > a && a < oldSize {
			if err := c.readFile(in, a, buf[:ss]); err != nil {
				return err
			}
			headRead = true
		}
		if end < b && b-ss < oldSize && !(b-ss == a && headRead) {
			if err := c.readFile(in, b-ss, buf[b-a-ss:]); err != nil {
				return err
			}
		}
		copy(buf[off-a:], p)
	}
	return c.replaceData(in, buf, a, dpol, newSize, nil, host)
}

// tryInline makes in's whole content one inline extent when the file of
// newSize bytes qualifies (format doc §5.5: from offset 0, smaller than a
// sector, within max_inline; compressed when that makes it smaller) and
// no item lies past the first sector. fill changes the content, which
// holds the current bytes. done reports that it did so. pd (or nil) may
// hold the content compressed already.
func (c *wctx) tryInline(in *winode, pol dataPolicy, newSize uint64, fill func([]byte), pd *PreparedData) (bool, error) {
	fsys := c.fsys
	limit := fsys.w.maxInline
	if newSize >= pol.ss || limit < 0 {
		return false, nil
	}
	all, err := c.fileExtents(in.ino, 0, math.MaxUint64)
	if err != nil {
		return false, err
	}
	for _, e := range all {
		if e.start != 0 {
			return false, nil
		}
	}
	content := make([]byte, newSize)
	if err := c.readExtents(in, all, 0, content[:min(in.item.Size, newSize)]); err != nil {
		return false, err
	}
	fill(content)
	e, ok, err := inlineExtent(content, pol, limit, c.gen, pd)
	if err != nil || !ok {
		return false, err
	}
	markCompression(c.t, compress.Type(e.fe.Compression))
	if err := c.apply(in, all, []extent{e}); err != nil {
		return true, err
	}
	in.item.Size = newSize
	return true, nil
}

// inlineExtent builds the inline item holding content, compressed when
// the policy compresses and the stream is smaller; ok is false when
// neither form fits the limit. pd (or nil) may hold content compressed
// ahead.
func inlineExtent(content []byte, pol dataPolicy, limit int, gen disk.Generation, pd *PreparedData) (extent, bool, error) {
	e := extent{length: uint64(len(content)), fe: disk.FileExtentItem{Generation: gen,
		RAMBytes: uint64(len(content)), Type: disk.FileExtentInline}}
	if pol.comp != compress.None && len(content) > 0 {
		out, err := pd.inlineStream(content, pol)
		if err != nil {
			return extent{}, false, err
		}
		if out != nil && len(out) <= limit {
			e.fe.Compression = disk.CompressionType(pol.comp)
			e.fe.InlineData = out
			return e, true, nil
		}
	}
	if len(content) > limit || len(content) == 0 {
		return extent{}, false, nil
	}
	e.fe.InlineData = append([]byte(nil), content...)
	return e, true, nil
}

// uninline turns an inline extent of in into a regular extent of one
// sector, so the file can grow past it or be shared.
func (c *wctx) uninline(in *winode, pol dataPolicy) error {
	first, err := c.fileExtents(in.ino, 0, 1)
	if err != nil || len(first) == 0 || first[0].fe.Type != disk.FileExtentInline {
		return err
	}
	buf := make([]byte, pol.ss)
	n := min(first[0].length, in.item.Size, pol.ss) // never bytes past the end of the file
	if err := c.readExtents(in, first, 0, buf[:n]); err != nil {
		return err
	}
	items, _, err := c.storeData(buf, 0, pol, nil, nil)
	if err != nil {
		return err
	}
	return c.apply(in, first, items)
}

// replaceData writes buf (whole sectors) as new extents at file offset
// a, replacing what lay there, and sets the size to newSize. Without
// NO_HOLES the gap between the old end and a gets hole items. pieces are
// buf's, prepared already, or nil; host (or nil) tells which bytes of
// buf may be shared with a host file.
func (c *wctx) replaceData(in *winode, buf []byte, a uint64, pol dataPolicy, newSize uint64, pieces []piece, host *hostBytes) error {
	fsys := c.fsys
	items, failed, err := c.storeData(buf, a, pol, pieces, host)
	if err != nil {
		return err
	}
	if failed && !pol.force {
		in.item.Flags |= disk.InodeNoCompress
	}
	b := a + uint64(len(buf))
	// One search from the sector before a: the item ending exactly at a
	// is the one growPrevious may extend (cutRange passes it over).
	from := a
	if a > 0 {
		from = a - 1
	}
	exts, err := c.fileExtents(in.ino, from, b)
	if err != nil {
		return err
	}
	del, keep := cutRange(exts, a, b)
	var prev *extent
	if len(exts) > 0 && exts[0].start+exts[0].length == a {
		prev = &exts[0]
	}
	// After the items in [a, b) are known: a grown extent reaches in.
	if items, err = c.growPrevious(in, a, items, prev); err != nil {
		return err
	}
	add := mergeSorted(keep, items)
	if !fsys.noHoles() {
		holes, err := c.holesIn(in, roundUpTo(in.item.Size, pol.ss), a)
		if err != nil {
			return err
		}
		add = mergeSorted(add, holes)
	}
	if err := c.apply(in, del, add); err != nil {
		return err
	}
	in.item.Size = newSize
	return nil
}

// growPrevious lets a write that continues the file's last write of this
// transaction on disk as well as in the file extend that extent instead
// of adding one (the kernel's delayed allocation gives sequential writes
// one extent per writeback; sysbench's seqwr writes 8 KiB at a time).
// items are the write's new extents at file offset a; it returns those
// still to be added: none when the one new extent went into the one
// before it. Only plain extents made in this transaction, whole (offset
// 0, every byte referenced) and referenced by that one item, are grown
// (txn.GrowDataExtent checks the references and the space). prev is the
// file's item ending exactly at a, or nil.
func (c *wctx) growPrevious(in *winode, a uint64, items []extent, prev *extent) ([]extent, error) {
	if len(items) != 1 || prev == nil {
		return items, nil
	}
	e := items[0]
	if !plainWhole(e.fe) || e.start != a {
		return items, nil
	}
	p := *prev
	if !plainWhole(p.fe) || p.start+p.length != a || p.fe.Generation != c.gen || p.length+e.length > maxGrownExtent ||
		p.fe.DiskBytenr+disk.LogicalAddr(p.fe.DiskNumBytes) != e.fe.DiskBytenr {
		return items, nil
	}
	ok, err := c.t.GrowDataExtent(p.fe.DiskBytenr, p.fe.DiskNumBytes, e.fe.DiskNumBytes, c.tr.Owner(), in.ino, p.start)
	if err != nil || !ok {
		return items, err
	}
	p.fe.DiskNumBytes += e.fe.DiskNumBytes
	p.fe.NumBytes += e.length
	p.fe.RAMBytes += e.length
	buf := make([]byte, p.fe.Size())
	p.fe.Encode(buf)
	k := disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey, Offset: p.start}
	if err := c.tr.UpdateItem(c.tx, k, func(b []byte) error {
		if len(b) != len(buf) {
			return fmt.Errorf("file extent item %v of %d bytes, want %d", k, len(b), len(buf))
		}
		copy(b, buf)
		return nil
	}); err != nil {
		return nil, err
	}
	c.logOps = append(c.logOps, logOp{file: dirKey{tree: c.tr.Owner(), ino: in.ino}, key: k, data: buf})
	in.item.NBytes += e.length
	return nil, nil
}

// maxGrownExtent bounds the extents growPrevious makes. An extent stays
// allocated whole while any part of it is referenced (a bookend), so a
// file rewritten piece by piece holds its old extents until each is
// overwritten completely: the larger they are, the more space a rewrite
// needs beside the file (a 40 MiB file rewritten in 1 MiB pieces on a
// small image ran out of space with one 40 MiB extent,
// TestWriteOverPinnedSpace). 1 MiB makes 128 writes of 8 KiB one extent
// and leaves writes of 1 MiB and more (FUSE's largest) as they are.
const maxGrownExtent = 1 << 20

// plainWhole reports whether fe is a regular, uncompressed, unencoded
// extent item naming its whole extent.
func plainWhole(fe disk.FileExtentItem) bool {
	return fe.Type == disk.FileExtentReg && fe.Compression == 0 && fe.Encryption == 0 && fe.OtherEncoding == 0 &&
		fe.DiskBytenr != 0 && fe.Offset == 0 && fe.NumBytes == fe.DiskNumBytes && fe.RAMBytes == fe.NumBytes
}

// holesIn returns hole items for the uncovered parts of [a, b).
func (c *wctx) holesIn(in *winode, a, b uint64) ([]extent, error) {
	if a >= b {
		return nil, nil
	}
	exts, err := c.fileExtents(in.ino, a, b)
	if err != nil {
		return nil, err
	}
	return holeItems(exts, a, b, c.gen), nil
}

// fileExtents returns the EXTENT_DATA items of ino that overlap [a, b),
// in file order, from the transaction's tree.
func (c *wctx) fileExtents(ino disk.ObjectID, a, b uint64) ([]extent, error) {
	from := disk.Key{ObjectID: ino, Type: disk.ExtentDataKey}
	if a > 0 {
		k, ok, err := c.lastKeyBelow(disk.Key{ObjectID: ino, Type: disk.ExtentDataKey, Offset: a + 1})
		if err != nil {
			return nil, err
		}
		if ok && k.ObjectID == ino && k.Type == disk.ExtentDataKey {
			from = k
		}
	}
	return fileExtentsIn(c.items(), ino, from, a, b)
}

// apply replaces the items del of in by add in the tree and moves the
// data references and nbytes accordingly.
func (c *wctx) apply(in *winode, del, add []extent) error {
	t := c.t
	for _, e := range del {
		k := disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey, Offset: e.start}
		if _, err := c.tr.DeleteItem(c.tx, k); err != nil {
			return err
		}
		c.logOps = append(c.logOps, logOp{file: dirKey{tree: c.tr.Owner(), ino: in.ino}, key: k})
	}
	for _, e := range add {
		buf := make([]byte, e.fe.Size())
		e.fe.Encode(buf)
		k := disk.Key{ObjectID: in.ino, Type: disk.ExtentDataKey, Offset: e.start}
		if err := c.tr.InsertItem(c.tx, k, buf); err != nil {
			return err
		}
		c.logOps = append(c.logOps, logOp{file: dirKey{tree: c.tr.Owner(), ino: in.ino}, key: k, data: buf})
	}
	root := c.tr.Owner()
	for r, n := range refDeltas(del, add) {
		var err error
		if n > 0 {
			err = t.AddDataRef(r.bytenr, r.numBytes, root, in.ino, r.pos, uint32(n))
		} else {
			err = t.DropDataRef(r.bytenr, r.numBytes, root, in.ino, r.pos, uint32(-n))
		}
		if err != nil {
			return err
		}
	}
	in.item.NBytes = uint64(int64(in.item.NBytes) + nbytesDelta(del, add))
	return nil
}

// readFile reads the bytes of in at [off, off+len(dst)) as they stand in
// the transaction.
func (c *wctx) readFile(in *winode, off uint64, dst []byte) error {
	exts, err := c.fileExtents(in.ino, off, off+uint64(len(dst)))
	if err != nil {
		return err
	}
	return c.readExtents(in, exts, off, dst)
}

// dataView reads file data as the running transaction has it, this very
// change's blocks so far included (it may have changed the csum tree):
// tree blocks through the transaction's table, the csum tree from its
// current root, data through the transaction (chunks it added, data it
// holds back). The read side is left as it is: it moves to the
// transaction only between whole changes (showTxn). Decoded compressed
// extents are not cached: an address this transaction freed and took
// again holds other data than the cache may have.
func (c *wctx) dataView() (*dataView, error) {
	fsys := c.fsys
	// The csum tree as this transaction has it if it opened it, else
	// as the read side has it (the last commit's: nothing changed it).
	csumRoot := fsys.csumRoot
	if slices.Contains(c.t.OpenedTrees(), disk.CsumTreeObjectID) {
		tr, err := c.t.Tree(disk.CsumTreeObjectID)
		if err != nil {
			return nil, err
		}
		csumRoot = tr.Root()
	}
	base := fsys.data
	if cur, ok := base.(*txnDataReader); ok {
		base = cur.base
	}
	return &dataView{fsys: fsys, blocks: &txBlocks{base: fsys.br, tx: c.t.Trans(), memo: &blockMemo{}}, csumRoot: csumRoot,
		data: &txnDataReader{base: base, t: c.t}}, nil
}

// readExtents fills dst with the file bytes at off from exts (which
// cover whatever of the range holds data); gaps read as zeros. Data goes
// through the read path, checksums verified.
func (c *wctx) readExtents(in *winode, exts []extent, off uint64, dst []byte) error {
	if c.gate != nil {
		// Changes beside this one may be adding csums: the view's cursor
		// over the csum tree is not lock-coupled.
		unlock := c.t.LockCsums()
		defer unlock()
	}
	v, err := c.dataView()
	if err != nil {
		return err
	}
	clear(dst)
	// The inode as the data readers know it: its flags (NODATASUM) and,
	// for error messages, its subvolume id.
	rin := &inode{sv: &subvol{id: in.tr.Owner()}, ino: in.ino, item: in.item}
	end := off + uint64(len(dst))
	for i := range exts {
		e := &exts[i]
		lo, hi := max(e.start, off), min(e.start+e.length, end)
		if lo >= hi {
			continue
		}
		if err := v.readExtent(rin, e, dst[lo-off:hi-off], lo, nil); err != nil {
			return err
		}
	}
	return nil
}
