package cli

import (
	"errors"
	"io/fs"
	pathpkg "path"
	"strconv"
	"syscall"

	"github.com/gobtrfs/btrfs"
)

// Default permissions of what the words create, as with umask 022.
const (
	defaultDirPerm  fs.FileMode = 0o755
	defaultFilePerm fs.FileMode = 0o644
)

var mkdirWord = word{
	name:     "mkdir",
	synopsis: "[-p] [-m MODE] PATH...",
	short:    "Make directories",
	long: `Make each directory. With -p, missing parents are made too (mode 755) and an
existing directory is no error. MODE (octal or symbolic, as for chmod, applied
to 777) sets the new directory's mode; the default is 755.`,
	flags: []flagDef{
		{name: "p", short: 'p', long: "parents", help: "make parents as needed; no error if the directory exists"},
		{name: "mode", short: 'm', long: "mode", arg: true, help: "mode of the new directories"},
	},
	run: runMkdir,
}

func runMkdir(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing operand")
	}
	perm := defaultDirPerm
	if v, ok := a.val("mode"); ok {
		m, err := parseMode(v)
		if err != nil {
			return err
		}
		perm = m.apply(0o777, true)
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := mkdirOne(s.fsys, p, perm, a.has("p")); err != nil {
			return err
		}
	}
	return nil
}

// mkdirOne makes one directory; with parents like mkdir -p. It tries the
// plain Mkdir first so that the common case costs one lookup.
func mkdirOne(fsys *btrfs.FS, p string, perm fs.FileMode, parents bool) error {
	err := fsys.Mkdir(p, perm)
	if err == nil || !parents {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := fsys.MkdirAll(pathpkg.Dir(p), defaultDirPerm); err != nil {
			return err
		}
		return fsys.Mkdir(p, perm)
	case errors.Is(err, fs.ErrExist):
		// Fine for a directory; MkdirAll says what is wrong otherwise.
		return fsys.MkdirAll(p, perm)
	}
	return err
}

var rmdirWord = word{
	name:     "rmdir",
	synopsis: "PATH...",
	short:    "Remove empty directories",
	long: `Remove each directory, which must be empty. An empty subvolume or snapshot
is deleted, as rmdir does on Linux (not the default subvolume).`,
	run: runRmdir,
}

func runRmdir(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing operand")
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if fi, err := s.fsys.Lstat(p); err == nil && !fi.IsDir() {
			return &fs.PathError{Op: "rmdir", Path: p, Err: syscall.ENOTDIR}
		}
		// An empty subvolume is deleted, as by the kernel's rmdir.
		if err := s.fsys.Remove(p); err != nil {
			return err
		}
	}
	return nil
}

var rmWord = word{
	name:     "rm",
	synopsis: "[-r] [-f] [-v] PATH...",
	short:    "Remove files and directories",
	long: `Remove each file. Directories need -r (which removes everything below them).
With -f, paths that do not exist are no error. With -v, every removed file is
named as rm -v names it. With -r, subvolumes and snapshots below PATH go too, as
rm -r removes them on Linux (emptied, then deleted): not the default
subvolume, nor a read-only one that is not empty; then nothing is removed.`,
	flags: []flagDef{
		{name: "r", short: 'r', long: "recursive", help: "remove directories and their contents"},
		{name: "r", short: 'R', help: "same as -r"},
		{name: "f", short: 'f', long: "force", help: "ignore paths that do not exist"},
		{name: "v", short: 'v', long: "verbose", help: "name every removed file"},
	},
	run: runRm,
}

func runRm(s *session, a *wordArgs) error {
	force := a.has("f")
	if len(a.ops) == 0 {
		if force {
			return nil
		}
		return usagef("missing operand")
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if p == "." {
			return &fs.PathError{Op: "rm", Path: "/", Err: errors.New("refusing to remove the top directory")}
		}
		fi, err := s.fsys.Lstat(p)
		switch {
		case err != nil && force && errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return err
		case fi.IsDir() && a.has("r"):
			err = removeTree(s, p, a.has("v"))
		case fi.IsDir():
			err = &fs.PathError{Op: "rm", Path: p, Err: syscall.EISDIR}
		default:
			err = s.fsys.Remove(p)
			if err == nil && a.has("v") {
				s.verbosef("removed %s", quoteName(s.show(p)))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes the directory p and everything below it with the
// library's RemoveAll, which takes subvolumes below p (and p itself) as
// rm -r takes them on Linux (emptied, then deleted by rmdir) and refuses
// what rm -r would fail on (a read-only subvolume with entries: EROFS)
// before anything goes. With verbose it names what went, in the order
// rm -rv does: each directory after its entries.
func removeTree(s *session, p string, verbose bool) error {
	var gone []string
	var dirs []bool
	if verbose {
		err := walkTree(s.fsys, p, true, func(q string, fi fs.FileInfo) error {
			gone, dirs = append(gone, q), append(dirs, fi.IsDir())
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := s.fsys.RemoveAll(p); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = &fs.PathError{Op: "rm", Path: p, Err: pe.Err}
		}
		return err
	}
	for i, q := range gone {
		if dirs[i] {
			s.verbosef("removed directory %s", quoteName(s.show(q)))
		} else {
			s.verbosef("removed %s", quoteName(s.show(q)))
		}
	}
	return nil
}

var mvWord = word{
	name:     "mv",
	synopsis: "[-f] [-n] [-v] SRC... DEST",
	short:    "Move or rename files",
	long: `Rename SRC to DEST, replacing DEST as rename(2) would. When DEST is an existing
directory or a symbolic link to one, every SRC moves into that directory under
its own name. -f is accepted (mv never asks); -n leaves an existing
destination alone and skips that SRC. A subvolume or snapshot moves to any
directory of the image, as on Linux (over an empty directory, never over
another subvolume).`,
	flags: []flagDef{
		{name: "f", short: 'f', long: "force", help: "replace existing destinations (the default)"},
		{name: "n", short: 'n', long: "no-clobber", help: "do not replace an existing destination"},
		{name: "v", short: 'v', long: "verbose", help: "name every file moved"},
	},
	run: runMv,
}

func runMv(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing file operand")
	}
	if len(a.ops) == 1 {
		return usagef("missing destination file operand after %s", quoteName(a.ops[0]))
	}
	paths, err := s.paths(a.ops)
	if err != nil {
		return err
	}
	// As in mv(1), the last of -f and -n wins.
	noClobber := a.lastOf("f", "n") == "n"
	srcs, dest := paths[:len(paths)-1], paths[len(paths)-1]
	dir, into := intoDir(s.fsys, dest)
	if !into && len(srcs) > 1 {
		return &fs.PathError{Op: "mv", Path: dest, Err: syscall.ENOTDIR}
	}
	for _, src := range srcs {
		to := dest
		if into {
			to = pathpkg.Join(dir, pathpkg.Base(src))
		}
		if noClobber {
			if _, err := s.fsys.Lstat(to); err == nil {
				continue
			}
		}
		if err := s.fsys.Rename(src, to); err != nil {
			return err
		}
		if a.has("v") {
			s.verbosef("renamed %s -> %s", quoteName(s.show(src)), quoteName(s.show(to)))
		}
	}
	return nil
}

var lnWord = word{
	name:     "ln",
	synopsis: "[-s] [-f] [-n] TARGET PATH",
	short:    "Make hard or symbolic links",
	long: `Make PATH a hard link to the file TARGET (a path in the same image), or with -s
a symbolic link whose target is the text TARGET, stored as given. When PATH is
an existing directory or a symbolic link to one, the link goes into that
directory under TARGET's last element. -f replaces an existing PATH that is not
a directory; -n takes a symbolic link PATH as a file, not as the directory it
points to (with -f: replaces the link).`,
	flags: []flagDef{
		{name: "s", short: 's', long: "symbolic", help: "make a symbolic link"},
		{name: "f", short: 'f', long: "force", help: "remove an existing destination first"},
		{name: "n", short: 'n', long: "no-dereference", help: "do not follow a symbolic link PATH to a directory"},
	},
	run: runLn,
}

func runLn(s *session, a *wordArgs) error {
	if len(a.ops) == 0 {
		return usagef("missing file operand")
	}
	if len(a.ops) != 2 {
		return usagef("need TARGET and PATH")
	}
	target := a.ops[0]
	if !a.has("s") {
		p, err := s.path(target)
		if err != nil {
			return err
		}
		target = p
	}
	name, err := s.path(a.ops[1])
	if err != nil {
		return err
	}
	linkItself := false
	if a.has("n") {
		fi, err := s.fsys.Lstat(name)
		linkItself = err == nil && fi.Mode()&fs.ModeSymlink != 0
	}
	if dir, into := intoDir(s.fsys, name); into && !linkItself {
		name = pathpkg.Join(dir, pathpkg.Base(target))
	}
	if a.has("f") {
		// ln -f removes what is in the way, but never a directory.
		if fi, err := s.fsys.Lstat(name); err == nil {
			if fi.IsDir() {
				return &fs.PathError{Op: "ln", Path: name, Err: errors.New("cannot overwrite directory")}
			}
			if err := s.fsys.Remove(name); err != nil {
				return err
			}
		}
	}
	if a.has("s") {
		return s.fsys.Symlink(target, name)
	}
	return s.fsys.Link(target, name)
}

var mknodWord = word{
	name:     "mknod",
	synopsis: "[-m MODE] PATH TYPE [MAJOR MINOR]",
	short:    "Make device files and FIFOs",
	long: `Make a special file: TYPE b (block device), c or u (character device), both
with MAJOR and MINOR numbers, or p (FIFO). MODE defaults to 644.`,
	flags: []flagDef{
		{name: "mode", short: 'm', long: "mode", arg: true, help: "mode of the new file"},
	},
	run: runMknod,
}

func runMknod(s *session, a *wordArgs) error {
	if len(a.ops) < 2 {
		return usagef("need PATH and TYPE")
	}
	perm := defaultFilePerm
	if v, ok := a.val("mode"); ok {
		m, err := parseMode(v)
		if err != nil {
			return err
		}
		perm = m.apply(0o666, false)
	}
	var kind fs.FileMode
	switch a.ops[1] {
	case "b":
		kind = fs.ModeDevice
	case "c", "u":
		kind = fs.ModeDevice | fs.ModeCharDevice
	case "p":
		kind = fs.ModeNamedPipe
	default:
		return usagef("TYPE must be b, c, u or p, not %q", a.ops[1])
	}
	var dev uint64
	if kind == fs.ModeNamedPipe {
		if len(a.ops) != 2 {
			return usagef("a FIFO takes no MAJOR and MINOR")
		}
	} else {
		if len(a.ops) != 4 {
			return usagef("a device needs MAJOR and MINOR")
		}
		major, err1 := strconv.ParseUint(a.ops[2], 0, 32)
		minor, err2 := strconv.ParseUint(a.ops[3], 0, 32)
		if err1 != nil || err2 != nil || major > 0xfff || minor > 0xfffff {
			return usagef("bad device number %s %s", a.ops[2], a.ops[3])
		}
		dev = btrfs.Mkdev(uint32(major), uint32(minor))
	}
	p, err := s.path(a.ops[0])
	if err != nil {
		return err
	}
	return s.fsys.Mknod(p, kind|perm, dev)
}

// intoDir reports whether mv and ln put their sources into dest, which
// coreutils does when dest is a directory after following a final
// symlink, and returns that directory with the symlinks resolved: Rename
// and Link do not follow symlinks, so "mv a linkToDir" must name the
// directory itself. A link that cannot be followed (dangling, a loop) is
// not a directory, so the operation replaces the link.
func intoDir(fsys *btrfs.FS, dest string) (string, bool) {
	dir, err := followLinks(fsys, dest)
	if err != nil {
		return dest, false
	}
	if fi, err := fsys.Lstat(dir); err != nil || !fi.IsDir() {
		return dest, false
	}
	return dir, true
}

// followLinks resolves a final symlink the way chmod and touch do on
// their operands, up to the kernel's 40 links; a path that does not
// exist (yet) is returned as it is.
func followLinks(fsys *btrfs.FS, p string) (string, error) {
	for range 40 {
		fi, err := fsys.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		t, err := fsys.ReadLink(p)
		if err != nil {
			return "", err
		}
		if !pathpkg.IsAbs(t) {
			t = pathpkg.Join(pathpkg.Dir(p), t)
		}
		p = cleanFSPath(t)
	}
	return "", &fs.PathError{Op: "follow", Path: p, Err: syscall.ELOOP}
}
