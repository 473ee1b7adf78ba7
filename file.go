package btrfs

import (
	"io"
	"io/fs"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// Whence values for Seek beyond io.SeekStart/Current/End, as Linux lseek.
const (
	SeekData = 3 // the next offset >= off that holds data
	SeekHole = 4 // the next offset >= off in a hole (EOF counts as a hole)
)

// File is an open file or directory of an FS. It implements fs.File,
// fs.ReadDirFile, io.ReaderAt and io.Seeker (with SeekData and SeekHole).
type File struct {
	fsys *FS
	name string

	// st is the inode and its extents as the FS showed them when they were
	// loaded. On a writable FS it is replaced when a change or a commit
	// happened since (FS.version), so an open file reads what the
	// filesystem holds now, as a file open on Linux does.
	st atomic.Pointer[fileState]

	ra readahead

	// pol is the data policy (checksums, compression) the file's last
	// write met, so the next WriteAt can checksum and compress its data
	// before it takes the FS lock (file_write.go); nil until one write
	// has run. A stale guess costs only the work: the write checks it.
	pol atomic.Pointer[dataPolicy]

	mu      sync.Mutex // guards off and dirPos
	off     int64
	dirPos  uint64 // last DIR_INDEX returned by ReadDir
	dirDone bool
	closed  bool
}

// fileState is one loaded version of an open file.
type fileState struct {
	ver uint64 // the FS version it was loaded at
	in  *inode

	extOnce sync.Once
	exts    []extent
	extErr  error
}

// newFile returns the File of inode in, which r (the read's view of
// owner, FS.reader) loaded; the File keeps owner, so each later read
// takes the view current then.
func newFile(owner, r *FS, name string, in *inode) *File {
	f := &File{fsys: owner, name: name}
	f.st.Store(&fileState{ver: r.version(), in: in})
	return f
}

// notLoaded is the version of a fileState that holds only the inode's
// numbers (newFileOf): no view has that version, so the first read loads
// the inode.
const notLoaded = ^uint64(0)

// newFileOf returns the File of inode ino of subvolume sv of owner,
// loaded at its first read.
func newFileOf(owner *FS, name string, sv, ino disk.ObjectID) *File {
	f := &File{fsys: owner, name: name}
	f.st.Store(&fileState{ver: notLoaded, in: &inode{sv: &subvol{id: sv}, ino: ino}})
	return f
}

// state returns the file's inode and extents as read r (FS.reader) sees
// them, reloading them when they were loaded at another version: not
// only an older one, since two reads of one File may hold views of
// different ages. A file whose inode is gone (removed while open) fails
// with fs.ErrNotExist.
func (f *File) state(r *FS) (*fileState, error) {
	st := f.st.Load()
	ver := r.version()
	if st.ver == ver {
		return st, nil
	}
	sv, err := r.subvolume(st.in.sv.id)
	if err != nil {
		return nil, err
	}
	in, err := r.findInode(sv, st.in.ino)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fs.ErrNotExist
	}
	nst := &fileState{ver: ver, in: in}
	if ver > st.ver || st.ver == notLoaded {
		// Kept for the reads after it. A read of an older view (versions
		// only grow) keeps its state to itself: it would make the reads
		// of the newer views load theirs again.
		f.st.CompareAndSwap(st, nst)
	}
	return nst, nil
}

// Stat returns the file's FileInfo.
func (f *File) Stat() (fs.FileInfo, error) {
	r, done := f.fsys.reader()
	defer done()
	st, err := f.state(r)
	if err != nil {
		return nil, f.pathErr("stat", err)
	}
	return &fileInfo{name: baseName(f.name), in: st.in}, nil
}

// Close marks the file closed; later calls fail with fs.ErrClosed.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	return nil
}

func (st *fileState) extents(fsys *FS) ([]extent, error) {
	st.extOnce.Do(func() { st.exts, st.extErr = fsys.loadExtents(st.in) })
	return st.exts, st.extErr
}

func (f *File) pathErr(op string, err error) error {
	return &fs.PathError{Op: op, Path: f.name, Err: err}
}

// ReadAt reads len(p) bytes at offset off; safe for concurrent use. On a
// writable FS each piece of viewPiece bytes is read in a view of its own.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	total := 0
	for {
		q := p[total:]
		if f.fsys.w != nil && len(q) > viewPiece {
			q = q[:viewPiece]
		}
		n, err := f.readAtOne(q, off+int64(total))
		total += n
		if err != nil || n < len(q) || total == len(p) {
			return total, err
		}
	}
}

// viewPiece bounds what one read of a writable FS's file data reads in
// one view: a longer read takes a view per piece, each showing every
// change returned before it. So no read holds a view longer than one
// piece takes, and the first change after a commit, which waits until
// the reads of older views are over (writer.drainViews), waits for at
// most that (docs/design/0009, "How long a view lives").
const viewPiece = 4 << 20

// readAtOne is ReadAt in one view, tried again in the current view when
// it may have met bytes rewritten in place (FS.staleCorrupt) or its view
// was of a transaction dropped meanwhile (FS.viewDropped).
func (f *File) readAtOne(p []byte, off int64) (int, error) {
	for try := 0; ; try++ {
		n, err, why := f.readAtView(p, off)
		if !f.fsys.retryRead(why, try) {
			return n, err
		}
	}
}

// readAtView is ReadAt in one view; why says whether to read again in a
// newer one (FS.readAgainWhy).
func (f *File) readAtView(p []byte, off int64) (n int, err error, why readAgain) {
	r, done := f.fsys.reader()
	defer done()
	st, err := f.state(r)
	if err != nil {
		return 0, f.pathErr("read", err), readDone
	}
	if w := f.fsys.w; w != nil {
		if h := w.readHook.Load(); h != nil {
			(*h)()
		}
	}
	n, err = f.readAtState(r, st, p, off)
	return n, err, r.readAgainWhy(err)
}

// readAtState is ReadAt over one loaded state, in read r's view.
func (f *File) readAtState(r *FS, st *fileState, p []byte, off int64) (int, error) {
	if st.in.isDir() {
		return 0, f.pathErr("read", syscall.EISDIR)
	}
	if off < 0 {
		return 0, f.pathErr("read", fs.ErrInvalid)
	}
	size := int64(st.in.item.Size)
	if off >= size {
		return 0, io.EOF
	}
	want := p
	if int64(len(p)) > size-off {
		want = p[:size-off]
	}
	if err := f.readAt(r, st, want, uint64(off)); err != nil {
		return 0, f.pathErr("read", err)
	}
	if len(want) < len(p) {
		return len(want), io.EOF
	}
	return len(want), nil
}

// readAt fills p from file offset off, which lies within i_size.
func (f *File) readAt(r *FS, st *fileState, p []byte, off uint64) error {
	exts, err := st.extents(r)
	if err != nil {
		return err
	}
	i := findExtent(exts, off)
	v := r.dataView()
	for len(p) > 0 {
		if i >= len(exts) || exts[i].start >= off+uint64(len(p)) {
			clear(p) // a hole up to the end of the request
			return nil
		}
		e := &exts[i]
		if e.start > off { // a hole before the next extent
			n := e.start - off
			clear(p[:n])
			p, off = p[n:], e.start
		}
		n := min(uint64(len(p)), e.start+e.length-off)
		if err := v.readExtent(st.in, e, p[:n], off, &f.ra); err != nil {
			return err
		}
		p, off = p[n:], off+n
		i++
	}
	return nil
}

// Read reads from the current offset.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, f.pathErr("read", fs.ErrClosed)
	}
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek sets the offset for the next Read, as lseek does, including
// SeekData and SeekHole.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	r, done := f.fsys.reader()
	defer done()
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := f.state(r)
	if err != nil {
		return 0, f.pathErr("seek", err)
	}
	size := int64(st.in.item.Size)
	var pos int64
	switch whence {
	case io.SeekStart:
		pos = offset
	case io.SeekCurrent:
		pos = f.off + offset
	case io.SeekEnd:
		pos = size + offset
	case SeekData, SeekHole:
		var err error
		if pos, err = f.seekDataHole(r, st, offset, whence == SeekData); err != nil {
			return 0, err
		}
	default:
		return 0, f.pathErr("seek", fs.ErrInvalid)
	}
	if pos < 0 {
		return 0, f.pathErr("seek", fs.ErrInvalid)
	}
	f.off = pos
	return pos, nil
}

// SeekDataAt returns the first offset at or after off that holds data,
// without moving the file's offset, so it is safe for concurrent use. Past
// the last data it fails with ENXIO, like lseek(SEEK_DATA).
func (f *File) SeekDataAt(off int64) (int64, error) { return f.seekAt(off, true) }

// SeekHoleAt returns the first offset at or after off in a hole (the end of
// the file counts as one), without moving the file's offset.
func (f *File) SeekHoleAt(off int64) (int64, error) { return f.seekAt(off, false) }

func (f *File) seekAt(off int64, data bool) (int64, error) {
	r, done := f.fsys.reader()
	defer done()
	st, err := f.state(r)
	if err != nil {
		return 0, f.pathErr("seek", err)
	}
	return f.seekDataHole(r, st, off, data)
}

// seekDataHole finds the next data (or hole) offset at or after off. Past
// the end it fails with ENXIO, as Linux does.
func (f *File) seekDataHole(r *FS, st *fileState, off int64, data bool) (int64, error) {
	size := int64(st.in.item.Size)
	if off < 0 || off >= size {
		return 0, f.pathErr("seek", syscall.ENXIO)
	}
	exts, err := st.extents(r)
	if err != nil {
		return 0, f.pathErr("seek", err)
	}
	pos := uint64(off)
	for i := findExtent(exts, pos); i < len(exts); i++ {
		e := &exts[i]
		if e.start >= uint64(size) {
			break
		}
		inData := e.dataLike() && e.start <= pos
		if data {
			if e.dataLike() {
				return int64(max(pos, e.start)), nil
			}
			continue
		}
		if !inData {
			return int64(pos), nil // pos is in a gap or an unwritten extent
		}
		pos = e.start + e.length
	}
	if data {
		return 0, f.pathErr("seek", syscall.ENXIO)
	}
	return min(int64(pos), size), nil
}

// ReadDir reads directory entries in the kernel's readdir order; n <= 0
// reads all that remain.
func (f *File) ReadDir(n int) ([]fs.DirEntry, error) {
	r, done := f.fsys.reader()
	defer done()
	return f.readDir(r, n)
}

// readDir is ReadDir in read r's view. Its entries keep the File's FS:
// their Info takes the view current then.
func (f *File) readDir(r *FS, n int) ([]fs.DirEntry, error) {
	st, err := f.state(r)
	if err != nil {
		return nil, f.pathErr("readdir", err)
	}
	if !st.in.isDir() {
		return nil, f.pathErr("readdir", errNotDir)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirDone {
		if n > 0 {
			return nil, io.EOF
		}
		return nil, nil
	}
	ents, err := r.readDir(st.in, f.dirPos, n)
	if err != nil {
		return nil, f.pathErr("readdir", err)
	}
	out := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = &fsDirEntry{fsys: f.fsys, dir: st.in, e: e}
		f.dirPos = e.index
	}
	if n <= 0 || len(ents) < n {
		f.dirDone = true
	}
	if n > 0 && len(out) == 0 {
		return nil, io.EOF
	}
	return out, nil
}
