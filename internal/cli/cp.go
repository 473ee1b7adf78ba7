package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/extract"
	"github.com/gobtrfs/btrfs/mkfs"
)

var cpWord = word{
	name:     "cp",
	synopsis: "[-r] [-a] [-p] [-n] [-v] HOSTSRC... PATH",
	short:    "Copy host files into the image (or, at the top level, out of one)",
	long: `Copy host files and trees into the filesystem, like cp(1) run by root.

Into the image: HOSTSRC are paths of this host (also in a script: a script
names host paths for HOSTSRC and image paths for PATH). When PATH is an
existing directory, or several HOSTSRC are given, each goes into it under
its own name; otherwise PATH is the name of the copy. A directory needs -r
(or -a); HOSTSRC/. copies what is in the directory, not the directory
itself. Existing directories are merged into; other existing files in the
way are replaced (with -n left alone). Holes in files stay holes, large
files are streamed.

Without -a or -p the copies get the permission bits of the source less the
umask and the set-id bits, owner root, the current time, no extended
attributes; a symlink named as HOSTSRC is followed unless copying
recursively, symlinks inside a tree are copied as symlinks, special files
as special files, and every name of a multiply-linked file becomes its own
file (as cp -r does).
  -p  keeps modes (with set-id bits), owners and nanosecond times.
  -a  is -r -p plus extended attributes, hardlinks among the copied files
      kept as hardlinks, and HOSTSRC itself never followed (as cp -a).

Out of an image (top level only): gobtrfs cp [-r] [-a] [-p] IMAGE:SRC... DEST
copies from the image to the host path DEST with the same rules for DEST
(holes kept). Without -a extended attributes are not copied and owners are
the caller's; without -a or -p times are set to now and modes lose the umask
and set-id bits. Hardlinks among the copied files are always kept (unlike
cp without -a).

Inside one image (top level only): gobtrfs cp [-r] [-a] [-p] IMAGE:SRC...
IMAGE:DEST copies as reflinks: the copies share the data extents of SRC
(cp --reflink), so no data is written.`,
	flags: []flagDef{
		{name: "r", short: 'r', long: "recursive", help: "copy directories and their contents"},
		{name: "r", short: 'R', help: "same as -r"},
		{name: "a", short: 'a', long: "archive", help: "-r -p plus xattrs, hardlinks, no dereferencing"},
		{name: "p", short: 'p', long: "preserve", help: "keep modes, owners and times"},
		{name: "n", short: 'n', long: "no-clobber", help: "do not replace existing files"},
		{name: "v", short: 'v', long: "verbose", help: "name every file copied"},
	},
	run: runCp,
}

func newCpCommand() *cobra.Command { return wordCommand(&cpWord) }

// cpOpts is what the cp options ask for.
type cpOpts struct {
	recursive, archive, preserve, noClobber, verbose bool
}

func runCp(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing file operand")
	}
	if len(a.ops) == 1 {
		return usagef("missing destination file operand after %s", quoteName(a.ops[0]))
	}
	o := cpOpts{recursive: a.has("r") || a.has("a"), archive: a.has("a"), preserve: a.has("a") || a.has("p"),
		noClobber: a.has("n"), verbose: a.has("v")}
	srcs, last := a.ops[:len(a.ops)-1], a.ops[len(a.ops)-1]
	if !s.script {
		srcImage, _ := splitImagePath(srcs[0])
		destImage, _ := splitImagePath(last)
		switch {
		case srcImage != srcs[0] && destImage == last:
			return cpOut(s, srcs, last, o)
		case srcImage != srcs[0] && filepath.Clean(srcImage) == filepath.Clean(destImage):
			return cpWithin(s, srcs, last, o)
		}
	}
	dest, err := s.path(last)
	if err != nil {
		return err
	}
	into := false
	if fi, err := s.fsys.Stat(dest); err == nil && fi.IsDir() {
		into = true
		// A symlink to a directory is a directory to copy into.
		if dest, err = followLinks(s.fsys, dest); err != nil {
			return err
		}
	}
	if !into && len(srcs) > 1 {
		return &fs.PathError{Op: "cp", Path: s.show(dest), Err: syscall.ENOTDIR}
	}
	for _, src := range srcs {
		target := dest
		if into && !isDotDir(src) {
			target = pathpkg.Join(dest, filepath.Base(filepath.Clean(src)))
		}
		if err := cpIn(s, src, target, o); err != nil {
			return err
		}
	}
	return nil
}

// isDotDir reports whether a source operand ends in "/." (or is "."): cp
// then copies the directory's contents into DEST, as the last element of
// SRC names DEST itself.
func isDotDir(src string) bool {
	src = strings.TrimRight(src, "/")
	return src == "." || strings.HasSuffix(src, "/.") || (filepath.Separator != '/' && strings.HasSuffix(src, string(filepath.Separator)+"."))
}

// cpIn copies the host path src to target in the session's filesystem.
func cpIn(s *session, src, target string, o cpOpts) error {
	stat := os.Stat
	if o.recursive {
		stat = os.Lstat
	}
	fi, err := stat(src)
	if err != nil {
		if image, _ := splitImagePath(src); image != src {
			if _, serr := os.Stat(image); serr == nil {
				return usagef("%s: copying from one image into another is not supported", src)
			}
		}
		return hostErr(err)
	}
	if fi.IsDir() && !o.recursive {
		return fmt.Errorf("-r not specified; omitting directory %s", quoteName(src))
	}
	if err := parentExists(s, target); err != nil {
		return err
	}
	source, err := mkfs.OpenPath(src, mkfs.PathOptions{Follow: !o.recursive, Hardlinks: o.archive})
	if err != nil {
		return hostErr(err)
	}
	defer source.Close()
	copts := mkfs.CopyOptions{
		KeepMode: o.preserve, Umask: processUmask(), KeepOwner: o.preserve,
		KeepTimes: o.preserve, KeepXattrs: o.archive, NoClobber: o.noClobber}
	if o.verbose {
		copts.Copying = func(rel, to string) {
			// As cp -v: a directory merged into says nothing.
			if fi, err := s.fsys.Lstat(to); err == nil && fi.IsDir() {
				return
			}
			from := src
			if rel != "." {
				from = strings.TrimSuffix(src, "/") + "/" + rel
			}
			s.verbosef("%s -> %s", quoteName(from), quoteName(s.show(to)))
		}
	}
	return mkfs.CopyInto(s.fsys, source, target, copts)
}

// parentExists checks that the directory a copy goes into exists, so that
// a copy into a missing directory says so, as cp(1) does, rather than
// what the filler finds in its way.
func parentExists(s *session, target string) error {
	if target == "." {
		return nil
	}
	fi, err := s.fsys.Stat(pathpkg.Dir(target))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &fs.PathError{Op: "cp", Path: s.show(target), Err: syscall.ENOENT}
	case err != nil:
		return err
	case !fi.IsDir():
		return &fs.PathError{Op: "cp", Path: s.show(target), Err: syscall.ENOTDIR}
	}
	return nil
}

// cpOut copies IMAGE:SRC operands out of the image to the host path dest
// with internal/extract. The image is opened read-only here, not through
// the session, so that the word's caller has nothing to commit.
func cpOut(s *session, srcs []string, dest string, o cpOpts) error {
	ro := &session{devices: s.devices, readOnly: true, warn: s.warn}
	paths, err := ro.paths(srcs)
	if ro.fsys != nil {
		defer ro.fsys.Close()
	}
	if err != nil {
		return err
	}
	into := false
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		into = true
	}
	if !into && len(paths) > 1 {
		return &fs.PathError{Op: "cp", Path: dest, Err: syscall.ENOTDIR}
	}
	for i, p := range paths {
		if err := cpOutOne(s, ro.fsys, srcs[i], p, dest, into, o); err != nil {
			return extractFailures(ro.image, err)
		}
	}
	return nil
}

// cpOutOne copies the image path p (the operand arg) to dest (into dest
// when into).
func cpOutOne(s *session, fsys *btrfs.FS, arg, p, dest string, into bool, o cpOpts) error {
	fi, err := fsys.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() && !o.recursive {
		return fmt.Errorf("-r not specified; omitting directory %s", quoteName(arg))
	}
	eo := extract.Options{NoOwners: !o.preserve, NoXattrs: !o.archive}
	target := dest
	if into && p != "." && !isDotDir(arg) {
		target = filepath.Join(dest, pathpkg.Base(p))
	}
	if o.noClobber && !fi.IsDir() {
		if _, err := os.Lstat(target); err == nil {
			return nil
		}
	}
	if o.verbose {
		s.verbosef("%s -> %s", quoteName(arg), quoteName(target))
	}
	switch {
	case fi.IsDir():
		_, err = extract.Run(context.Background(), fsys, p, target, eo)
	case into:
		_, err = extract.Run(context.Background(), fsys, p, dest, eo)
	default:
		err = extractAs(fsys, p, target, eo)
	}
	if err != nil || o.preserve {
		return hostErr(err)
	}
	return hostErr(resetCopied(target))
}

// extractAs extracts the non-directory p under the host name target:
// extract names it after p, so it goes into a scratch directory next to
// target first and is renamed into place (replacing what was there).
func extractAs(fsys *btrfs.FS, p, target string, eo extract.Options) error {
	tmp, err := os.MkdirTemp(filepath.Dir(target), ".gobtrfs-cp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := extract.Run(context.Background(), fsys, p, tmp, eo); err != nil {
		return err
	}
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() {
		return &fs.PathError{Op: "cp", Path: target, Err: errors.New("cannot overwrite directory with non-directory")}
	}
	return os.Rename(filepath.Join(tmp, pathpkg.Base(p)), target)
}

// resetCopied gives a tree copied out without -p what cp gives new files:
// the current time and the mode less the umask and set-id bits.
func resetCopied(root string) error {
	now := time.Now()
	umask := processUmask()
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := chmodHost(p, uint32(fi.Mode().Perm())&^umask|stickyBit(fi.Mode())); err != nil {
				return &os.PathError{Op: "chmod", Path: p, Err: err}
			}
		}
		if err := touchHost(p, now, d.Type()&fs.ModeSymlink != 0); err != nil {
			return &os.PathError{Op: "utimes", Path: p, Err: err}
		}
		return nil
	})
}

func stickyBit(m fs.FileMode) uint32 {
	if m&fs.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// processUmask reads the umask without changing it (umask(2) can only
// set it, and other goroutines may create files meanwhile); 022 when
// /proc does not say.
func processUmask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(m) & 0o777
				}
			}
		}
	}
	return 0o022
}
