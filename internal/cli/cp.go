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
	synopsis: "[-r] [-a] [-p] HOSTSRC... PATH",
	short:    "Copy host files into the image (or, at the top level, out of one)",
	long: `Copy host files and trees into the filesystem, like cp(1) run by root.

Into the image: HOSTSRC are paths of this host (also in a script: a script
names host paths for HOSTSRC and image paths for PATH). When PATH is an
existing directory, or several HOSTSRC are given, each goes into it under
its own name; otherwise PATH is the name of the copy. A directory needs -r
(or -a). Existing directories are merged into; other existing files in the
way are replaced. Holes in files stay holes, large files are streamed.

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
cp without -a).`,
	flags: []flagDef{
		{name: "r", short: 'r', long: "recursive", help: "copy directories and their contents"},
		{name: "r", short: 'R', help: "same as -r"},
		{name: "a", short: 'a', long: "archive", help: "-r -p plus xattrs, hardlinks, no dereferencing"},
		{name: "p", short: 'p', long: "preserve", help: "keep modes, owners and times"},
	},
	run: runCp,
}

func newCpCommand() *cobra.Command { return wordCommand(&cpWord) }

// cpOpts is what the cp options ask for.
type cpOpts struct {
	recursive, archive, preserve bool
}

func runCp(s *session, a *wordArgs) error {
	if len(a.ops) < 2 {
		return usagef("cp: need SRC and DEST")
	}
	o := cpOpts{recursive: a.has("r") || a.has("a"), archive: a.has("a"), preserve: a.has("a") || a.has("p")}
	srcs, last := a.ops[:len(a.ops)-1], a.ops[len(a.ops)-1]
	if !s.script {
		if image, _ := splitImagePath(last); image == last {
			if image, _ := splitImagePath(srcs[0]); image != srcs[0] {
				return cpOut(s, srcs, last, o)
			}
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
		return &fs.PathError{Op: "cp", Path: dest, Err: syscall.ENOTDIR}
	}
	for _, src := range srcs {
		target := dest
		if into {
			target = pathpkg.Join(dest, filepath.Base(filepath.Clean(src)))
		}
		if err := cpIn(s.fsys, src, target, o); err != nil {
			return err
		}
	}
	return nil
}

// cpIn copies the host path src to target in fsys.
func cpIn(fsys *btrfs.FS, src, target string, o cpOpts) error {
	stat := os.Stat
	if o.recursive {
		stat = os.Lstat
	}
	fi, err := stat(src)
	if err != nil {
		if image, _ := splitImagePath(src); image != src {
			return usagef("cp: %s: copying from one image into another is not supported", src)
		}
		return err
	}
	if fi.IsDir() && !o.recursive {
		return fmt.Errorf("cp: -r not specified; omitting directory %s", src)
	}
	source, err := mkfs.OpenPath(src, mkfs.PathOptions{Follow: !o.recursive, Hardlinks: o.archive})
	if err != nil {
		return err
	}
	defer source.Close()
	return mkfs.CopyInto(fsys, source, target, mkfs.CopyOptions{
		KeepMode: o.preserve, Umask: processUmask(), KeepOwner: o.preserve,
		KeepTimes: o.preserve, KeepXattrs: o.archive})
}

// cpOut copies IMAGE:SRC operands out of the image to the host path dest
// with internal/extract. The image is opened read-only here, not through
// the session, so that the word's caller has nothing to commit.
func cpOut(s *session, srcs []string, dest string, o cpOpts) error {
	ro := &session{devices: s.devices, readOnly: true}
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
	for _, p := range paths {
		if err := cpOutOne(ro.fsys, p, dest, into, o); err != nil {
			return err
		}
	}
	return nil
}

// cpOutOne copies the image path p to dest (into dest when into).
func cpOutOne(fsys *btrfs.FS, p, dest string, into bool, o cpOpts) error {
	fi, err := fsys.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() && !o.recursive {
		return fmt.Errorf("cp: -r not specified; omitting directory %s", p)
	}
	eo := extract.Options{NoOwners: !o.preserve, NoXattrs: !o.archive}
	target := dest
	if into && p != "." {
		target = filepath.Join(dest, pathpkg.Base(p))
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
		return err
	}
	return resetCopied(target)
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
