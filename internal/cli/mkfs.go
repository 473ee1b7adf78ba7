package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/mkfs"
)

// mkfsFlags are the flags of gobtrfs mkfs, as given.
type mkfsFlags struct {
	size, label, uuid, nodeSize, sectorSize, csum string
	meta, data, rootDir, tarFile, compress        string
	chown, chmod, deviceUUID                      string
	features, runtimeFeatures, subvols            []string
	inodeFlags, snapshots                         []string
	shrink, reproducible, quiet, force            bool
	// mkfs.btrfs 6.19 flags that change nothing for gobtrfs (-K: it
	// never discards; -v: it prints no summary) or that it refuses with
	// a reason (-M), and the one that only prints (-V).
	nodiscard, mixed, version, reflink bool
	verbose                            int
}

func newMkfsCommand() *cobra.Command {
	var fl mkfsFlags
	cmd := &cobra.Command{
		Use:   "mkfs [flags] IMAGE|DEVICE",
		Short: "Create a filesystem, empty or filled from a directory or a tar stream",
		Long: `Create a new btrfs filesystem in an image file or on a block device, as
mkfs.btrfs does, and optionally fill it through the same write operations
every other gobtrfs change uses:

  --rootdir DIR   copy a host directory in: contents (holes stay holes),
                  modes, owners, nanosecond times, xattrs, hardlinks,
                  symlinks, fifos, sockets and device nodes
  --tar FILE|-    the same from a tar stream (ustar, pax, GNU; xattrs from
                  SCHILY.xattr records) without extracting it, so owners and
                  device nodes need no root

--snapshot SOURCE:DEST[:ro] (repeatable; mkfs.btrfs has no such option)
snapshots a subvolume once the filesystem is filled, e.g. a read-only
factory-reset copy of the root: the snapshot shares the source's tree and
costs one block. A snapper layout in one command:

  gobtrfs mkfs -r rootfs -u default:@ -u @home -u @/.snapshots \
      --snapshot @:@/.snapshots/1/snapshot:ro disk.img

(the input holds @, @home and @/.snapshots/1).

--chown UID:GID and --chmod SPEC (rsync notation: "D755,F644", "go-w",
"a+rX", "Fg=u"; each clause means what it does for chmod(1), without a umask)
override what the input says. With SOURCE_DATE_EPOCH set, or
--reproducible, the same input and flags give a byte-identical image: UUIDs
are derived from a hash of the input, times newer than SOURCE_DATE_EPOCH
are clamped to it, nothing is random.

The flags are mkfs.btrfs 6.19's (-b, -L, -U, -n, -s, -m, -d, -O, -f, -q,
-K, -r, -u/--subvol TYPE:SUBDIR, --inode-flags, --compress, --shrink,
--reflink, -V), and gobtrfs started through a symlink named mkfs.btrfs
runs this command, so image builders can use it in its place. With
SOURCE_DATE_EPOCH, times newer than it are clamped to it; with
DETERMINISTIC_SEED=1 (which needs -U) the UUIDs derive from -U and the
input. --compress also sets the top directory's compression property, so
files added later are compressed too. --reflink makes the image share the
input files' data blocks on the host (FICLONERANGE: the input and the
image on one btrfs or XFS; mkfs fails before writing when the host cannot
clone): the bytes are still read for the checksums, but only partial last
sectors, inline files and metadata are written, and shared data are not
compressed.

IMAGE is created (sparse) when it does not exist, of --byte-count bytes or
else of a size estimated from the input (like mkfs.btrfs --rootdir; 256
MiB for an empty filesystem); --tar - cannot be measured first and needs
-b. A target holding a filesystem or a partition table is only
overwritten with -f (--force); a mounted one never, nor an image inside
the --rootdir. A failed mkfs removes the image it created and puts an
existing image file back as it was.
Input that cannot be stored (a name over 255 bytes, a symlink target too
long for the node size) stops mkfs with an error naming the path, before
anything is written when the input can be read twice (not for --tar -).`,
		Args: mkfsArgs(&fl),
		RunE: func(cmd *cobra.Command, args []string) error {
			if done, err := mkfsInfoOnly(cmd, &fl); done || err != nil {
				return err
			}
			return runMkfs(cmd, args[0], &fl)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&fl.size, "byte-count", "b", "", "filesystem size (K, M, G, T suffixes; default: the file's or device's size)")
	f.StringVar(&fl.size, "size", "", "the same as --byte-count")
	f.StringVarP(&fl.label, "label", "L", "", "filesystem label")
	f.StringVarP(&fl.uuid, "uuid", "U", "", "filesystem UUID")
	f.StringVarP(&fl.nodeSize, "nodesize", "n", "", "tree block size (default 16K)")
	f.StringVarP(&fl.sectorSize, "sectorsize", "s", "", "data block size (default 4K)")
	f.StringVar(&fl.csum, "csum", "", "checksum: crc32c (default), xxhash, sha256 or blake2")
	f.StringVar(&fl.csum, "checksum", "", "the same as --csum")
	f.StringVarP(&fl.meta, "metadata", "m", "", "metadata profile: single or dup (default dup)")
	f.StringVarP(&fl.data, "data", "d", "", "data profile: single or dup (default single)")
	f.StringArrayVarP(&fl.features, "features", "O", nil, "mkfs.btrfs feature names, comma separated, ^ to disable (repeatable; list-all lists them)")
	f.StringArrayVarP(&fl.runtimeFeatures, "runtime-features", "R", nil, "deprecated (removed in mkfs.btrfs 6.3): taken as -O")
	f.StringVarP(&fl.rootDir, "rootdir", "r", "", "copy this directory into the filesystem")
	f.StringVar(&fl.tarFile, "tar", "", "fill the filesystem from this tar file (- for standard input)")
	f.StringArrayVarP(&fl.subvols, "subvol", "u", nil, "[TYPE:]SUBDIR: make this directory of the input a subvolume; TYPE rw (default), ro, default or default-ro (repeatable)")
	f.StringArrayVar(&fl.snapshots, "snapshot", nil, "SOURCE:DEST[:ro]: once filled, snapshot the subvolume at SOURCE (. for the top level) to DEST, read-only with :ro (repeatable; not in mkfs.btrfs)")
	f.StringArrayVar(&fl.inodeFlags, "inode-flags", nil, "FLAGS:PATH: set nodatacow and/or nodatasum (comma separated) on PATH of the input and below it (repeatable)")
	f.BoolVar(&fl.reflink, "reflink", false, "(with --rootdir) share file data with the input by cloning ranges, where the host can")
	f.StringVar(&fl.compress, "compress", "", "compress file data: zlib, lzo or zstd, optionally :LEVEL")
	f.StringVar(&fl.chown, "chown", "", "owner of every entry, UID:GID")
	f.StringVar(&fl.chmod, "chmod", "", "mode override of every entry (rsync --chmod notation)")
	f.BoolVar(&fl.shrink, "shrink", false, "make the image as small as the tree allows (grow it again with filesystem resize)")
	f.BoolVar(&fl.reproducible, "reproducible", false, "byte-identical output for the same input (implied by SOURCE_DATE_EPOCH)")
	f.BoolVarP(&fl.quiet, "quiet", "q", false, "no progress display")
	f.BoolVarP(&fl.force, "force", "f", false, "overwrite an existing filesystem or partition table")
	f.StringVar(&fl.deviceUUID, "device-uuid", "", "the device UUID (sub-uuid)")
	f.BoolVarP(&fl.nodiscard, "nodiscard", "K", false, "do not TRIM the device (gobtrfs never does)")
	f.BoolVarP(&fl.mixed, "mixed", "M", false, "mixed data and metadata block groups (node size = sector size, single profile)")
	f.CountVarP(&fl.verbose, "verbose", "v", "more messages (accepted for mkfs.btrfs compatibility)")
	f.BoolVarP(&fl.version, "version", "V", false, "print the version and exit")
	_ = f.MarkHidden("size")
	_ = f.MarkHidden("checksum")
	return cmd
}

// runMkfs checks the flags, picks the source and runs mkfs.Build.
func runMkfs(cmd *cobra.Command, image string, fl *mkfsFlags) error {
	opts, err := fl.buildOptions()
	if err != nil {
		return err
	}
	if err := mkfsCheckNotInside(image, fl.rootDir); err != nil {
		return err
	}
	open, cleanup, err := fl.opener(cmd.InOrStdin(), opts)
	if err != nil {
		return err
	}
	if len(fl.runtimeFeatures) > 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "WARNING: runtime features are deprecated, use -O|--features instead")
	}
	for _, w := range mkfs.FeatureWarnings(opts.Format.Features) {
		fmt.Fprintln(cmd.ErrOrStderr(), "WARNING: "+w)
	}
	if fl.reflink {
		if err := reflinkCheck(fl.rootDir, image); err != nil {
			cleanup()
			return err
		}
	}
	// With an input read twice, mkfs sizes a new image from it (as
	// mkfs.btrfs --rootdir does); otherwise a new image needs --size.
	sized := opts.Format.Size != 0 || opts.PrePass
	if err := mkfsCheckTarget(image, sized, fl.force); err != nil {
		cleanup()
		return err
	}
	defer cleanup()
	bar := newProgress(cmd.ErrOrStderr(), fl.quiet, "mkfs", 0)
	opts.OnSummary = func(s *mkfs.Summary) { bar.total = s.DataBytes }
	opts.Progress = bar.add
	st, err := mkfs.BuildContext(cmd.Context(), image, open, *opts)
	bar.finish()
	if err == nil && st.NotSharedBytes > 0 {
		// The host cloned the first file (reflinkCheck) but refused
		// some ranges: input files on another filesystem below the
		// input directory, or offsets off the host's block boundaries.
		fmt.Fprintf(cmd.ErrOrStderr(), "gobtrfs mkfs: --reflink: %d bytes could not be shared with the input and were written (%d shared)\n",
			st.NotSharedBytes, st.SharedBytes)
	}
	return err
}

// buildOptions turns the flags into mkfs.BuildOptions; errors are usage
// errors.
func (fl *mkfsFlags) buildOptions() (*mkfs.BuildOptions, error) {
	o := &mkfs.BuildOptions{Reproducible: fl.reproducible, Shrink: fl.shrink}
	fo := &o.Format
	var err error
	if fl.size != "" {
		if fo.Size, err = mkfsParseSize(fl.size); err != nil {
			return nil, usagef("--size: %v", err)
		}
	}
	sizes := []struct {
		s   string
		dst *int
		n   string
	}{{fl.nodeSize, &fo.NodeSize, "--nodesize"}, {fl.sectorSize, &fo.SectorSize, "--sectorsize"}}
	for _, x := range sizes {
		if x.s == "" {
			continue
		}
		v, err := mkfsParseSize(x.s)
		if err != nil || v > 1<<20 {
			return nil, usagef("%s %q: not a size", x.n, x.s)
		}
		*x.dst = int(v)
	}
	fo.Label, fo.MetadataProfile, fo.DataProfile = fl.label, fl.meta, fl.data
	if err := fl.progsOptions(o); err != nil {
		return nil, err
	}
	if fl.uuid != "" {
		if fo.UUID, err = btrfs.ParseUUID(fl.uuid); err != nil || fo.UUID.IsZero() {
			return nil, usagef("--uuid %q: not a UUID", fl.uuid)
		}
	}
	if fo.Csum, err = mkfsParseCsum(fl.csum); err != nil {
		return nil, err
	}
	if fl.rootDir != "" && fl.tarFile != "" {
		return nil, usagef("--rootdir and --tar exclude each other")
	}
	if fl.compress != "" {
		alg, lvl, _ := strings.Cut(fl.compress, ":")
		o.Compress, o.CompressProperty = strings.ToLower(alg), true
		if o.Compress == "no" || o.Compress == "none" {
			o.Compress = "" // mkfs.btrfs's spelling of the default
		}
		if lvl != "" {
			if o.CompressLevel, err = strconv.Atoi(lvl); err != nil {
				return nil, usagef("--compress %q: bad level", fl.compress)
			}
		}
	}
	if fl.chown != "" {
		if o.Owner, err = mkfsParseOwner(fl.chown); err != nil {
			return nil, err
		}
	}
	if fl.chmod != "" {
		if _, err = mkfs.ParseChmod(fl.chmod); err != nil {
			return nil, usageError{err}
		}
		o.Chmod = fl.chmod
	}
	if s, ok := os.LookupEnv("SOURCE_DATE_EPOCH"); ok && s != "" {
		secs, err := strconv.ParseInt(s, 10, 64)
		if err != nil || secs < 0 {
			return nil, usagef("SOURCE_DATE_EPOCH=%q: not a number of seconds", s)
		}
		o.Epoch = time.Unix(secs, 0)
		o.Reproducible = true
	}
	if err := deterministicSeed(o); err != nil {
		return nil, err
	}
	return o, nil
}

// opener returns how to open the input: a directory, a tar file, standard
// input, or nothing (an empty filesystem). Standard input can be read once
// only, so a reproducible build spools it to an unlinked temporary file
// for the pre-pass that hashes it.
func (fl *mkfsFlags) opener(stdin io.Reader, o *mkfs.BuildOptions) (mkfs.Opener, func(), error) {
	nothing := func() {}
	switch {
	case fl.rootDir != "":
		if _, err := mkfs.OpenDir(fl.rootDir); err != nil {
			return nil, nil, err
		}
		o.PrePass = true
		return func() (mkfs.Source, error) { return mkfs.OpenDir(fl.rootDir) }, nothing, nil
	case fl.tarFile == "-" && !o.Reproducible:
		used := false
		return func() (mkfs.Source, error) {
			if used {
				return nil, errors.New("standard input read twice")
			}
			used = true
			return mkfs.NewTarSource(stdin), nil
		}, nothing, nil
	case fl.tarFile == "-":
		f, err := os.CreateTemp("", "gobtrfs-mkfs-*.tar")
		if err != nil {
			return nil, nil, err
		}
		os.Remove(f.Name())
		if _, err := io.Copy(f, stdin); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("spool standard input: %w", err)
		}
		return tarFileOpener(f, o), func() { f.Close() }, nil
	case fl.tarFile != "":
		f, err := os.Open(fl.tarFile)
		if err != nil {
			return nil, nil, err
		}
		return tarFileOpener(f, o), func() { f.Close() }, nil
	}
	o.PrePass = true
	return func() (mkfs.Source, error) { return emptySource{}, nil }, nothing, nil
}

func tarFileOpener(f *os.File, o *mkfs.BuildOptions) mkfs.Opener {
	o.PrePass = true
	return func() (mkfs.Source, error) {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return mkfs.NewTarSource(f), nil
	}
}

// emptySource is the input of a filesystem made empty.
type emptySource struct{}

func (emptySource) Next() (*mkfs.Entry, error) { return nil, io.EOF }
func (emptySource) Close() error               { return nil }

// mkfsParseSize reads a byte count with an optional binary suffix (K, M,
// G, T, P, E; "KiB" and "KB" spellings too, all powers of 1024 as in
// mkfs.btrfs).
func mkfsParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	if t != "" {
		if i := strings.IndexByte("KMGTPE", t[len(t)-1]); i >= 0 {
			shift = 10 * (i + 1)
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)>>shift {
		return 0, fmt.Errorf("%q: not a size", s)
	}
	return v << shift, nil
}

func mkfsParseCsum(s string) (btrfs.CsumType, error) {
	t, err := btrfs.ParseCsumType(s)
	if err != nil {
		return 0, usagef("--csum %q: one of crc32c, xxhash, sha256, blake2", s)
	}
	return t, nil
}

func mkfsParseOwner(s string) (*mkfs.Owner, error) {
	u, g, ok := strings.Cut(s, ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return nil, usagef("--chown %q: want numeric UID:GID", s)
	}
	return &mkfs.Owner{UID: uint32(uid), GID: uint32(gid)}, nil
}
