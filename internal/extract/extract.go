package extract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/gobtrfs/btrfs"
)

// Options tune Run. The zero value extracts everything it is allowed to:
// owners only when running as root, xattrs that the host accepts.
type Options struct {
	// Workers copy file contents in parallel; 0 means 4 per CPU.
	Workers int
	// NoOwners skips chown even when running as root.
	NoOwners bool
	// NoXattrs skips extended attributes.
	NoXattrs bool
	// Progress, if set, is called after each file with the bytes copied.
	Progress func(bytes int64)
	// Overwrite replaces what is in the way on the host: an existing
	// non-directory where anything goes, as cp --remove-destination does
	// (a directory in the way of a non-directory stays a failure).
	// Without it an existing non-directory is a failure naming it;
	// existing directories are merged into either way.
	Overwrite bool
	// Warn, if set, is told about each entry or attribute skipped because
	// the host cannot represent it (device nodes, fifos, sockets and
	// extended attributes on Windows); err wraps errors.ErrUnsupported.
	// Such skips are not failures. It may be called from several
	// goroutines at once.
	Warn func(path string, err error)
}

// Failure is one path that could not be extracted.
type Failure struct {
	Path string // in the filesystem
	Dest string // on the host, where it was to go
	Err  error
}

// Error reports every failure of a Run that went on past them.
type Error struct{ Failures []Failure }

// Error lists the failures, at most 20 of them.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d paths could not be extracted:", len(e.Failures))
	for i, f := range e.Failures {
		if i == 20 {
			fmt.Fprintf(&b, "\n\t... and %d more", len(e.Failures)-20)
			break
		}
		fmt.Fprintf(&b, "\n\t%s: %v", f.Path, f.Err)
	}
	return b.String()
}

// Unwrap gives the individual errors, so errors.Is(err, btrfs.ErrCorrupt)
// holds when any failure was corruption.
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		out[i] = f.Err
	}
	return out
}

// Stats counts what a Run made.
type Stats struct {
	Files, Dirs, Symlinks, Hardlinks, Special int
	// Skipped counts what the host cannot represent (see Options.Warn).
	Skipped int
	Bytes   int64
}

type inodeID struct{ subvol, ino uint64 }

type runner struct {
	ctx   context.Context
	fsys  *btrfs.FS
	dst   string
	opts  Options
	owner bool

	mu       sync.Mutex
	failures []Failure
	links    map[inodeID]string // first extracted path of multi-link inodes
	stats    Stats
	dirs     []dirMeta // directories whose metadata is applied last, deepest first

	jobs chan fileJob
	wg   sync.WaitGroup
}

type dirMeta struct {
	dst  string
	name string
	st   *btrfs.Stat
}

// fileJob copies one range of a file; large files are split into several
// jobs so one big file still keeps every worker busy.
type fileJob struct {
	f          *outFile
	start, end int64
}

// outFile is one regular file being extracted by one or more jobs.
type outFile struct {
	name, dst string
	st        *btrfs.Stat
	out       *os.File // created before the jobs are queued, so links to it can be made at once
	src       *btrfs.File

	mu      sync.Mutex
	pending int   // jobs not yet finished
	bytes   int64 // data bytes copied so far
	err     error // first failure
}

// splitSize is the range one job copies of a large file.
const splitSize = 8 << 20

// Run extracts src (an io/fs path, "." for the whole filesystem view) into
// the directory dst, which is created if needed. It returns the counts and,
// if anything failed, an *Error naming every failed path.
func Run(ctx context.Context, fsys *btrfs.FS, src, dst string, opts Options) (Stats, error) {
	r := &runner{ctx: ctx, fsys: fsys, dst: dst, opts: opts, owner: os.Geteuid() == 0 && !opts.NoOwners,
		links: make(map[inodeID]string), jobs: make(chan fileJob, 64)}
	workers := opts.Workers
	if workers <= 0 {
		// Reading is mostly waiting for the device: keep several reads in
		// flight per core.
		workers = 4 * runtime.GOMAXPROCS(0)
	}
	for i := 0; i < workers; i++ {
		r.wg.Add(1)
		go r.worker()
	}
	fi, err := fsys.Lstat(src)
	if err != nil {
		close(r.jobs)
		r.wg.Wait()
		return r.stats, err
	}
	if fi.IsDir() {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			close(r.jobs)
			r.wg.Wait()
			return r.stats, err
		}
		r.walkDir(src, dst, fi)
	} else {
		// A file goes into dst; when dst cannot be a directory, nothing
		// can be extracted and that is the error, not a silent success.
		if err := os.MkdirAll(dst, 0o755); err != nil {
			close(r.jobs)
			r.wg.Wait()
			return r.stats, err
		}
		r.entry(src, filepath.Join(dst, path.Base(src)), fi)
	}
	close(r.jobs)
	r.wg.Wait()
	// Directory times and modes last, deepest first, so creating children
	// does not disturb them.
	sort.SliceStable(r.dirs, func(i, j int) bool { return len(r.dirs[i].dst) > len(r.dirs[j].dst) })
	for _, d := range r.dirs {
		r.applyMeta(d.name, d.dst, d.st, true)
	}
	if ctx.Err() != nil {
		return r.stats, ctx.Err()
	}
	if len(r.failures) > 0 {
		sort.Slice(r.failures, func(i, j int) bool { return r.failures[i].Path < r.failures[j].Path })
		return r.stats, &Error{Failures: r.failures}
	}
	return r.stats, nil
}

func (r *runner) fail(name, dst string, err error) {
	r.mu.Lock()
	r.failures = append(r.failures, Failure{Path: name, Dest: dst, Err: err})
	r.mu.Unlock()
}

// skip records an entry (or a part of one) the host cannot represent: not
// a failure, but counted and passed to Options.Warn.
func (r *runner) skip(name string, err error) {
	r.mu.Lock()
	r.stats.Skipped++
	r.mu.Unlock()
	if r.opts.Warn != nil {
		r.opts.Warn(name, err)
	}
}

func (r *runner) walkDir(name, dst string, fi fs.FileInfo) {
	st := fi.Sys().(*btrfs.Stat)
	r.mu.Lock()
	r.stats.Dirs++
	r.dirs = append(r.dirs, dirMeta{dst: dst, name: name, st: st})
	r.mu.Unlock()
	f, err := r.fsys.OpenFile(name)
	if err != nil {
		r.fail(name, dst, err)
		return
	}
	for r.ctx.Err() == nil {
		ents, err := f.ReadDir(256)
		for _, e := range ents {
			child := path.Join(name, e.Name())
			cfi, err := e.Info()
			if err != nil {
				r.fail(child, filepath.Join(dst, e.Name()), err)
				continue
			}
			r.entry(child, filepath.Join(dst, e.Name()), cfi)
		}
		if err == io.EOF || (err == nil && len(ents) == 0) {
			break
		}
		if err != nil {
			r.fail(name, dst, err)
			break
		}
	}
}

// entry extracts one directory entry of any kind.
func (r *runner) entry(name, dst string, fi fs.FileInfo) {
	if err := checkHostName(path.Base(name)); err != nil {
		r.fail(name, dst, err)
		return
	}
	st := fi.Sys().(*btrfs.Stat)
	mode := fi.Mode()
	if mode.IsDir() {
		if err := r.makeDir(dst); err != nil {
			r.fail(name, dst, err)
			return
		}
		r.walkDir(name, dst, fi)
		return
	}
	if err := r.clearWay(dst); err != nil {
		r.fail(name, dst, err)
		return
	}
	if st.Nlink > 1 {
		id := inodeID{st.Subvolume, st.Ino}
		r.mu.Lock()
		first, seen := r.links[id]
		if !seen {
			r.links[id] = dst
		}
		r.mu.Unlock()
		if seen {
			if err := os.Link(first, dst); err != nil {
				r.fail(name, dst, err)
				return
			}
			r.mu.Lock()
			r.stats.Hardlinks++
			r.mu.Unlock()
			return
		}
	}
	switch {
	case mode.IsRegular():
		r.queueFile(name, dst, st)
		return
	case mode&fs.ModeSymlink != 0:
		target, err := r.fsys.ReadLink(name)
		if err == nil {
			err = os.Symlink(target, dst)
		}
		if err != nil {
			r.fail(name, dst, err)
			return
		}
		r.count(func(s *Stats) { s.Symlinks++ })
	default:
		if err := mknodHost(dst, st.Mode, st.RdevMajor, st.RdevMinor); errors.Is(err, errors.ErrUnsupported) {
			r.skip(name, err)
			return
		} else if err != nil {
			r.fail(name, dst, fmt.Errorf("mknod: %w", err))
			return
		}
		r.count(func(s *Stats) { s.Special++ })
	}
	r.applyMeta(name, dst, st, false)
}

// makeDir makes the directory dst or merges into one that exists; a
// non-directory in the way is replaced with Overwrite, else a failure.
func (r *runner) makeDir(dst string) error {
	err := os.Mkdir(dst, 0o700)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, lerr := os.Lstat(dst)
	switch {
	case lerr != nil:
		return lerr
	case fi.IsDir():
		return nil
	case !r.opts.Overwrite:
		return err
	}
	if err := os.Remove(dst); err != nil {
		return err
	}
	return os.Mkdir(dst, 0o700)
}

// clearWay removes an existing non-directory at dst when Overwrite is
// set, so that the entry can be made there; a directory in the way is a
// failure, as with cp.
func (r *runner) clearWay(dst string) error {
	if !r.opts.Overwrite {
		return nil
	}
	fi, err := os.Lstat(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return &fs.PathError{Op: "replace", Path: dst, Err: errors.New("cannot overwrite directory with non-directory")}
	}
	return os.Remove(dst)
}

func (r *runner) count(f func(*Stats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

func (r *runner) queueFile(name, dst string, st *btrfs.Stat) {
	src, err := r.fsys.OpenFile(name)
	if err != nil {
		r.fail(name, dst, err)
		return
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		src.Close()
		r.fail(name, dst, err)
		return
	}
	f := &outFile{name: name, dst: dst, st: st, out: out, src: src}
	size := int64(st.Size)
	n := max(1, int((size+splitSize-1)/splitSize))
	f.pending = n
	for i := 0; i < n; i++ {
		r.jobs <- fileJob{f: f, start: int64(i) * splitSize, end: min(size, int64(i+1)*splitSize)}
	}
}

func (r *runner) worker() {
	defer r.wg.Done()
	buf := make([]byte, 1<<20)
	for j := range r.jobs {
		var n int64
		var err error
		if r.ctx.Err() != nil {
			err = r.ctx.Err()
		} else {
			n, err = r.copyRange(j, buf)
		}
		r.finishJob(j.f, n, err)
	}
}

// finishJob records one job's result; the last job of a file closes it and
// sets its metadata.
func (r *runner) finishJob(f *outFile, n int64, err error) {
	f.mu.Lock()
	f.bytes += n
	if err != nil && f.err == nil {
		f.err = err
	}
	f.pending--
	last := f.pending == 0
	f.mu.Unlock()
	if !last {
		return
	}
	err = f.err
	if err == nil {
		err = f.out.Truncate(int64(f.st.Size))
	}
	if cerr := f.out.Close(); err == nil {
		err = cerr
	}
	f.src.Close()
	if err != nil {
		r.fail(f.name, f.dst, err)
		return
	}
	r.count(func(s *Stats) { s.Files++; s.Bytes += f.bytes })
	if r.opts.Progress != nil {
		r.opts.Progress(f.bytes)
	}
	r.applyMeta(f.name, f.dst, f.st, false)
}
