package mkfs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gobtrfs/btrfs"
)

// BuildOptions choose how Build makes and fills an image.
type BuildOptions struct {
	// Format is passed to Format. With Reproducible, Build fills in
	// Format.Reproducible, Format.Seed (when nil) and Format.Time.
	Format Options

	// PrePass makes Build read the source once before writing anything:
	// every entry is validated (names, symlink targets), the data bytes
	// are counted for OnSummary, and with Reproducible the contents are
	// hashed into the seed. It needs an Opener that can open the source
	// twice.
	PrePass bool
	// OnSummary, if set, is called with the pre-pass's findings before
	// the image is formatted.
	OnSummary func(*Summary)

	// Reproducible makes the image a function of the input and the
	// options: UUIDs derived from a hash of the entries (or from
	// Format.Seed), the creation time and the times of directories the
	// input only implies fixed (Epoch, or the newest modification time of
	// the input), and every access time taken to be the modification time
	// (reading the input moves access times, so they are not input).
	Reproducible bool
	// Epoch, when not zero, is SOURCE_DATE_EPOCH: access and modification
	// times newer than it are clamped to it, and it is the creation time.
	// It implies Reproducible.
	Epoch time.Time

	// Owner, if set, replaces the owner of every entry.
	Owner *Owner
	// Chmod, if not empty, changes the mode bits of every entry but
	// symlinks, hardlinks and implied directories; the notation is
	// ParseChmod's ("D755,F644", "go-w").
	Chmod string

	// Compress is the algorithm for file data ("zlib", "lzo", "zstd"; ""
	// for none) and CompressLevel its level (0: the default).
	Compress      string
	CompressLevel int
	// CompressProperty also records Compress as the top directory's
	// compression property (btrfs.compression, as `btrfs property set /
	// compression ALG`), so that files made there later, by the kernel
	// or by gobtrfs, are compressed with it too. gobtrfs mkfs --compress
	// sets it; mkfs.btrfs does not.
	CompressProperty bool

	// Subvolumes are directories of the input to make subvolumes of
	// (paths relative to the top of the input); each must exist in it.
	Subvolumes []string
	// Subvols are more subvolumes, each read-only or the default as
	// asked (mkfs.btrfs --subvol TYPE:SUBDIR).
	Subvols []Subvolume
	// InodeFlags set NODATACOW or NODATASUM on paths of the input and
	// what lies below them (mkfs.btrfs --inode-flags).
	InodeFlags []InodeFlags
	// Snapshots are made, in order, once the filesystem is filled.
	Snapshots []Snapshot
	// Shrink asks for the smallest image that holds the tree: the
	// filesystem is built in an image of a size estimated from the input
	// (or Format.Size, when given), then cut to its last used byte
	// (btrfs.FS.Shrink) and the file truncated.
	Shrink bool

	// CommitBytes and CommitEntries bound the work in one transaction
	// (and so the memory the dirty tree blocks take): Build commits when
	// either is reached. 0 means 1 GiB and 8192. File data itself is
	// written at once, not held until the commit, so the byte bound is
	// generous: every commit waits for the disk.
	CommitBytes   int64
	CommitEntries int

	// Progress, if set, is called after each entry with its data bytes.
	Progress func(bytes int64)

	// Reflink shares the data of regular files with the input instead
	// of writing them (mkfs.btrfs --reflink): the whole sectors of every
	// data extent are cloned from the host file into the image file
	// (FICLONERANGE, Linux), where both lie on one host filesystem that
	// clones (btrfs, XFS). The bytes are still read, for the checksums;
	// a file's partial last sector and inline files are written, and
	// shared extents are not compressed. Ranges the host refuses are
	// written, and counted in Stats.NotSharedBytes. It applies to
	// entries of a DirSource (OpenDir); others are written.
	Reflink bool
}

// Owner is a numeric owner.
type Owner struct{ UID, GID uint32 }

// Summary is what the pre-pass found.
type Summary struct {
	Entries   int64
	DataBytes int64
	// Newest is the latest modification time of the input.
	Newest time.Time
	// Digest hashes every entry's metadata and (with Reproducible) data.
	Digest []byte
}

// Stats is what Build did.
type Stats struct {
	Entries   int64
	DataBytes int64
	Commits   int
	// SharedBytes and NotSharedBytes are, with Reflink, the bytes stored
	// by sharing the host's blocks and those the host refused to share
	// and were written instead, every copy counted.
	SharedBytes, NotSharedBytes int64
}

// Build formats the image at path (see Format) and fills it with the
// entries of the source open returns, through the same btrfs.FS
// operations every other change uses. Entries are applied in source
// order, missing parent directories made on the way; hardlinks come after
// every other entry, and the times of directories last (creating entries
// changes their parent's modification time). A commit follows every
// CommitBytes of data or CommitEntries entries, and one ends the build.
//
// An error names the entry it is about. A failed build leaves no trace,
// as far as it can: an image it created is removed, and an existing
// image file gets its former contents back (its data was copied aside
// before the first write; holes cost nothing). A block device keeps what
// the failure left.
func Build(path string, open Opener, opts BuildOptions) (*Stats, error) {
	return BuildContext(context.Background(), path, open, opts)
}

// BuildContext is Build that stops between entries (with ctx's error)
// once ctx is done, undoing the build as any failure does.
func BuildContext(ctx context.Context, path string, open Opener, opts BuildOptions) (*Stats, error) {
	subvols := map[string]bool{}
	for _, sv := range opts.Subvolumes {
		p, err := CleanPath(sv)
		if err != nil || p == "." {
			return nil, fmt.Errorf("%w: --subvol %q: not a directory below the top", ErrInput, sv)
		}
		subvols[p] = true
	}
	plan, err := planFlags(&opts, subvols)
	if err != nil {
		return nil, err
	}
	if opts.Shrink && opts.Format.Size == 0 && !opts.PrePass {
		return nil, fmt.Errorf("%w: --shrink without --size needs an input that can be read twice (not standard input)", ErrInput)
	}
	if !opts.Epoch.IsZero() {
		opts.Reproducible = true
	}
	switch opts.Compress {
	case "", "zlib", "lzo", "zstd":
	default:
		return nil, fmt.Errorf("%w: compression %q (zlib, lzo or zstd)", ErrUnsupported, opts.Compress)
	}
	chmod, err := parseChmodOption(opts.Chmod)
	if err != nil {
		return nil, err
	}
	nodeSize := opts.Format.NodeSize
	if nodeSize == 0 {
		nodeSize = max(DefaultNodeSize, opts.Format.SectorSize)
	}
	f := &filler{ctx: ctx, opts: &opts, nodeSize: nodeSize, chmod: chmod, dirs: map[string]*dirState{}, subvols: subvols, plan: plan}
	bopts := writeOptions(&opts, func() time.Time { return f.now })
	var sum *Summary
	if opts.PrePass {
		src, err := open()
		if err != nil {
			return nil, err
		}
		sum, err = Inspect(src, nodeSize, opts.Reproducible)
		src.Close()
		if err != nil {
			return nil, err
		}
		if opts.OnSummary != nil {
			opts.OnSummary(sum)
		}
	}
	if err := f.settle(sum); err != nil {
		return nil, err
	}
	if opts.Format.Size == 0 && sum != nil {
		if _, err := os.Stat(path); opts.Shrink || errors.Is(err, os.ErrNotExist) {
			opts.Format.Size = startSize(sum, &opts.Format)
		}
	}
	u, err := prepareUndo(path)
	if err != nil {
		return nil, err
	}
	if err := f.format(path, bopts, open); err != nil {
		return &f.stats, u.restore(err)
	}
	u.done()
	return &f.stats, nil
}

// format formats path and fills it.
func (f *filler) format(path string, bopts *btrfs.Options, open Opener) error {
	if err := Format(path, f.opts.Format); err != nil {
		return err
	}
	fsys, err := btrfs.OpenWritable(path, bopts)
	if err != nil {
		return err
	}
	f.fsys = fsys
	err = f.run(open)
	if err == nil && f.opts.Shrink {
		_, err = fsys.Shrink()
	}
	if wc, werr := fsys.WriteCounters(); werr == nil {
		f.stats.SharedBytes, f.stats.NotSharedBytes = wc.DeviceBytesShared, wc.DeviceBytesNotShared
	}
	if err != nil {
		_ = fsys.Rollback() // a failed build commits nothing more
	}
	if cerr := fsys.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// startSize is the size of an image Build creates without being given
// one, and the size a --shrink build starts from: room for the data and
// an allowance for metadata, both times their copies, plus the fixed
// chunks, so the chunks sized from it (a tenth of the filesystem) stay
// small and a cut at the end leaves little unused.
func startSize(sum *Summary, o *Options) int64 {
	dataCopies, metaCopies := int64(1), int64(2)
	if o.DataProfile == "dup" {
		dataCopies = 2
	}
	if o.MetadataProfile == "single" {
		metaCopies = 1
	}
	data := sum.DataBytes + sum.DataBytes/8
	meta := sum.Entries*2048 + sum.DataBytes/64
	size := dataCopies*data + metaCopies*meta + 256<<20
	return (size + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB
}

// settle fixes the reproducible parts of the options: the creation time
// and the seed.
func (f *filler) settle(sum *Summary) error {
	o := f.opts
	if !o.Reproducible {
		f.now = o.Format.Time
		if f.now.IsZero() {
			f.now = time.Now()
		}
		return nil
	}
	switch {
	case !o.Epoch.IsZero():
		f.now = o.Epoch
	case !o.Format.Time.IsZero():
		f.now = o.Format.Time
	case sum != nil && !sum.Newest.IsZero():
		f.now = sum.Newest
	default:
		f.now = time.Unix(0, 0)
	}
	f.now = f.now.Truncate(time.Second)
	o.Format.Time = f.now
	o.Format.Reproducible = true
	if o.Format.Seed == nil {
		if sum == nil && o.Format.UUID.IsZero() {
			return errors.New("mkfs: a reproducible build needs a pre-pass over the input, a seed or a UUID")
		}
		h := sha256.New()
		if sum != nil {
			h.Write(sum.Digest)
		}
		fo := o.Format
		fo.Seed, fo.Time = nil, time.Time{}
		fmt.Fprintf(h, "%+v|%q|%d|%v|%q", fo, o.Compress, o.CompressLevel, o.Owner, o.Chmod)
		o.Format.Seed = h.Sum(nil)
	}
	return nil
}

// Inspect reads every entry of src, validating each (names, symlink
// targets for nodeSize) and counting entries and data bytes. With
// withData it also hashes the file contents into the digest; the
// metadata is always hashed.
func Inspect(src Source, nodeSize int, withData bool) (*Summary, error) {
	s := &Summary{}
	h := sha256.New()
	for {
		e, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := e.validate(nodeSize); err != nil {
			return nil, err
		}
		s.Entries++
		s.DataBytes += e.DataBytes()
		if e.Mtime.After(s.Newest) {
			s.Newest = e.Mtime
		}
		hashEntry(h, e)
		if withData && e.Open != nil {
			if err := hashData(h, e); err != nil {
				return nil, err
			}
		}
	}
	s.Digest = h.Sum(nil)
	return s, nil
}

// hashEntry writes an unambiguous rendering of e's metadata to w. The
// access time is left out: reading the input (readlink, for one) moves
// it, and a reproducible build stores the modification time in its place.
func hashEntry(w io.Writer, e *Entry) {
	xs := append([]Xattr(nil), e.Xattrs...)
	sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
	fmt.Fprintf(w, "%q %d %o %d %d %d %d %d %q %q %d %v %d\n", e.Path, e.Kind, e.Perm, e.UID, e.GID,
		e.Mtime.UnixNano(), e.DevMajor, e.DevMinor, e.Target, e.LinkOf, e.Size, e.Segments, len(xs))
	for _, x := range xs {
		fmt.Fprintf(w, "%q %q\n", x.Name, x.Value)
	}
}

func hashData(w io.Writer, e *Entry) error {
	r, err := e.Open()
	if err != nil {
		return fmt.Errorf("%q: %w", e.Path, err)
	}
	defer r.Close()
	return copyExact(w, r, e.DataBytes(), e.Path)
}

// dirState is what Build remembers of a directory until the end: whether
// the input named it and the times to give it last.
type dirState struct {
	explicit     bool
	existed      bool // in the filesystem before (CopyInto): times left alone unless explicit
	atime, mtime time.Time
}

// filler applies entries to the open filesystem.
type filler struct {
	ctx      context.Context // checked between entries
	fsys     *btrfs.FS
	opts     *BuildOptions
	nodeSize int
	chmod    func(Kind, uint32) uint32 // nil: modes as given
	now      time.Time                 // creation time, times of implied directories
	dirs     map[string]*dirState
	subvols  map[string]bool // directories to make subvolumes; true until made
	plan     *flagPlan       // subvolume types and inode flags (nil: none)
	links    [][2]string     // deferred hardlinks: existing path, new path
	stats    Stats
	// copying is set by CopyInto: the tree may exist already (directories
	// are merged, other files replaced) and nothing is committed.
	copying bool

	pendingBytes   int64
	pendingEntries int
}

// run applies every entry, then the hardlinks and directory times, and
// commits.
func (f *filler) run(open Opener) error {
	raw, err := open()
	if err != nil {
		return err
	}
	src := newPrefetch(raw, f.fsys.PrepareData, f.opts.Reflink) // reading and preparing the input overlap with writing
	defer src.Close()
	f.dirs["."] = &dirState{atime: f.now, mtime: f.now}
	if o := f.opts.Owner; o != nil {
		if err := f.chown(".", o.UID, o.GID); err != nil {
			return err
		}
	}
	if err := f.applyFlags("."); err != nil {
		return err
	}
	if err := f.fill(src); err != nil {
		return err
	}
	if err := f.setCompressProperty(); err != nil {
		return err
	}
	if err := f.finishFlags(); err != nil {
		return err
	}
	if err := f.makeSnapshots(); err != nil {
		return err
	}
	f.stats.Commits++
	return f.fsys.Commit()
}

// fill applies every entry of src, then the hardlinks and directory times.
func (f *filler) fill(src Source) error {
	for {
		if err := f.ctx.Err(); err != nil {
			return err
		}
		e, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := e.validate(f.nodeSize); err != nil {
			return err
		}
		if err := f.apply(e); err != nil {
			return err
		}
		f.stats.Entries++
		f.stats.DataBytes += e.DataBytes()
		if f.opts.Progress != nil {
			f.opts.Progress(e.DataBytes())
		}
		if err := f.maybeCommit(1, 0); err != nil {
			return err
		}
	}
	for p, todo := range f.subvols {
		if todo {
			return fmt.Errorf("%w: --subvol %q: no such directory in the input", ErrInput, p)
		}
	}
	for _, l := range f.links {
		if err := f.replace(l[1], KindHardlink); err != nil {
			return err
		}
		if err := f.fsys.Link(l[0], l[1]); err != nil {
			return err
		}
		if err := f.maybeCommit(1, 0); err != nil {
			return err
		}
	}
	return f.dirTimes()
}

// maybeCommit counts work and commits once a threshold is reached.
func (f *filler) maybeCommit(entries int, bytes int64) error {
	if f.copying {
		return nil
	}
	f.pendingEntries += entries
	f.pendingBytes += bytes
	maxEntries := f.opts.CommitEntries
	if maxEntries <= 0 {
		maxEntries = 8192
	}
	if f.pendingBytes < f.commitBytes() && f.pendingEntries < maxEntries {
		return nil
	}
	f.pendingBytes, f.pendingEntries = 0, 0
	f.stats.Commits++
	return f.fsys.Commit()
}

func (f *filler) commitBytes() int64 {
	if f.opts.CommitBytes > 0 {
		return f.opts.CommitBytes
	}
	return 1 << 30
}

// dirTimes gives every directory its times, after everything in it was
// made.
func (f *filler) dirTimes() error {
	paths := make([]string, 0, len(f.dirs))
	for p := range f.dirs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		d := f.dirs[p]
		if d.existed && !d.explicit {
			continue
		}
		if err := f.fsys.Chtimes(p, d.atime, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

// times returns the access and modification times to store for an entry.
func (f *filler) times(e *Entry) (atime, mtime time.Time) {
	if f.opts.Reproducible {
		return f.clamp(e.Mtime), f.clamp(e.Mtime)
	}
	return f.clamp(e.Atime), f.clamp(e.Mtime)
}

// clamp limits t to the epoch, when there is one.
func (f *filler) clamp(t time.Time) time.Time {
	if !f.opts.Epoch.IsZero() && t.After(f.opts.Epoch) {
		return f.opts.Epoch
	}
	if t.IsZero() {
		return f.now
	}
	return t
}

// mkdir makes directory p, as a subvolume when asked to (its UUID
// derived from the build's seed when reproducible, random otherwise).
func (f *filler) mkdir(p string, perm fs.FileMode) error {
	if _, ok := f.subvols[p]; !ok {
		if err := f.fsys.MkdirWith(p, perm, exact()); err != nil {
			return err
		}
		return f.applyFlags(p)
	}
	so := &btrfs.SubvolumeOptions{Time: f.now}
	if f.opts.Reproducible {
		h := sha256.New()
		h.Write(f.opts.Format.Seed)
		h.Write([]byte("\x00subvolume\x00" + p))
		copy(so.UUID[:], h.Sum(nil))
	}
	if _, err := f.fsys.CreateSubvolume(p, so); err != nil {
		return err
	}
	f.subvols[p] = false
	if err := f.fsys.Chmod(p, perm); err != nil {
		return err
	}
	return f.applyFlags(p)
}

// parents makes the missing directories above p (mode 0755, the override
// owner or root), remembering them as implied.
func (f *filler) parents(p string) error {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return nil
	}
	dir := p[:i]
	if _, ok := f.dirs[dir]; ok {
		return nil
	}
	if err := f.parents(dir); err != nil {
		return err
	}
	if err := f.mkdir(dir, 0o755); err != nil {
		if f.copying && f.isDir(dir) {
			f.dirs[dir] = &dirState{existed: true}
			return nil
		}
		if errors.Is(err, fs.ErrExist) {
			return inputErr(p, "parent %q is not a directory", dir)
		}
		return err
	}
	f.dirs[dir] = &dirState{atime: f.now, mtime: f.now}
	if o := f.opts.Owner; o != nil {
		return f.chown(dir, o.UID, o.GID)
	}
	return nil
}

// exact makes inodes without what Linux would inherit from their
// directory (default ACL, set-group-ID bit): mkfs copies its source's
// own modes, owners and ACLs, as mkfs.btrfs --rootdir does.
func exact() *btrfs.CreateOptions { return &btrfs.CreateOptions{Exact: true} }
