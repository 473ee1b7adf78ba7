package btrfs

import (
	"io"
	"io/fs"
	"slices"
	"strings"
	"syscall"
)

var (
	_ fs.FS          = (*FS)(nil)
	_ fs.ReadDirFS   = (*FS)(nil)
	_ fs.ReadFileFS  = (*FS)(nil)
	_ fs.StatFS      = (*FS)(nil)
	_ fs.ReadLinkFS  = (*FS)(nil)
	_ fs.ReadDirFile = (*File)(nil)
	_ io.ReaderAt    = (*File)(nil)
	_ io.Seeker      = (*File)(nil)
)

// Open opens the named file or directory, following symlinks. The result is
// always a *File.
func (fsys *FS) Open(name string) (fs.File, error) { return fsys.OpenFile(name) }

// OpenFile is Open returning the concrete type.
func (fsys *FS) OpenFile(name string) (*File, error) {
	r, done := fsys.reader()
	defer done()
	return r.openFile(fsys, name)
}

// openFile is OpenFile in read fsys's view (FS.reader) of owner, which
// the File keeps.
func (fsys *FS) openFile(owner *FS, name string) (*File, error) {
	in, err := fsys.walk("open", name, true)
	if err != nil {
		return nil, err
	}
	return newFile(owner, fsys, name, in), nil
}

// Stat describes the named file, following symlinks.
func (fsys *FS) Stat(name string) (fs.FileInfo, error) {
	fsys, done := fsys.reader()
	defer done()
	in, err := fsys.walk("stat", name, true)
	if err != nil {
		return nil, err
	}
	return &fileInfo{name: baseName(name), in: in}, nil
}

// Lstat describes the named file without following a final symlink.
func (fsys *FS) Lstat(name string) (fs.FileInfo, error) {
	fsys, done := fsys.reader()
	defer done()
	in, err := fsys.walk("lstat", name, false)
	if err != nil {
		return nil, err
	}
	return &fileInfo{name: baseName(name), in: in}, nil
}

// ReadDir lists the named directory sorted by name, as io/fs requires.
func (fsys *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	r, done := fsys.reader()
	defer done()
	f, err := r.openFile(fsys, name)
	if err != nil {
		return nil, err
	}
	ents, err := f.readDir(r, -1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// ReadFile returns the contents of the named file.
func (fsys *FS) ReadFile(name string) ([]byte, error) {
	for try := 0; ; try++ {
		b, n, f, err, why := fsys.readFileView(name)
		if !fsys.retryRead(why, try) {
			if err == nil && f != nil && n < len(b) {
				// Past the first piece, a view per piece (File.ReadAt).
				var m int
				m, err = f.ReadAt(b[n:], int64(n))
				if n += m; err == io.EOF {
					err = nil
				}
			}
			return b[:n], err
		}
	}
}

// readFileView is ReadFile in one view: a buffer of the file's size with
// its first n bytes read. On a writable FS it reads at most viewPiece
// bytes and returns the open file f to read the rest through. why as
// for File.readAtView.
func (fsys *FS) readFileView(name string) (_ []byte, n int, f *File, _ error, why readAgain) {
	r, done := fsys.reader()
	defer done()
	f, err := r.openFile(fsys, name)
	if err != nil {
		return nil, 0, nil, err, readDone
	}
	st := f.st.Load()
	if st.in.isDir() {
		return nil, 0, nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EISDIR}, readDone
	}
	size := st.in.item.Size
	if size > uint64(maxReadFile) {
		return nil, 0, nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EFBIG}, readDone
	}
	buf := make([]byte, size)
	first, more := buf, f
	if fsys.w != nil && len(first) > viewPiece {
		first = first[:viewPiece]
	} else {
		more = nil
	}
	n, err = f.readAtState(r, st, first, 0)
	if err == io.EOF && n == len(first) {
		err = nil
	}
	if n < len(first) {
		buf, more = buf[:n], nil // short: the file ended
	}
	return buf, n, more, err, r.readAgainWhy(err)
}

// maxReadFile bounds ReadFile's allocation; larger files are read through
// Open.
const maxReadFile = 1 << 34

// ReadLink returns the target of the named symlink.
func (fsys *FS) ReadLink(name string) (string, error) {
	fsys, done := fsys.reader()
	defer done()
	in, err := fsys.walk("readlink", name, false)
	if err != nil {
		return "", err
	}
	if !in.isSymlink() {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	t, err := fsys.readlink(in)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return t, nil
}

// readlink reads a symlink's target: the file's data.
func (fsys *FS) readlink(in *inode) (string, error) {
	size := in.item.Size
	if size > 64<<10 {
		return "", &fs.PathError{Op: "readlink", Err: syscall.ENAMETOOLONG}
	}
	f := newFile(fsys, fsys, "", in)
	buf := make([]byte, size)
	if err := f.readAt(fsys, f.st.Load(), buf, 0); err != nil {
		return "", err
	}
	return string(buf), nil
}
