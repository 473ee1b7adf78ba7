package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	pathpkg "path"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/probe"
)

// fsFlags are the flags every command that opens a filesystem takes.
type fsFlags struct {
	devices       []string
	superFallback bool
}

func (f *fsFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&f.devices, "device", "d", nil, "another device of a multi-device filesystem (repeatable)")
	cmd.Flags().BoolVar(&f.superFallback, "super-fallback", false, "use a mirror superblock if the primary one is damaged")
}

// open opens the filesystem in image read-only; warnings go to warn
// (see openImage).
func (f *fsFlags) open(image string, warn func(string)) (*btrfs.FS, error) {
	return openImage(image, &btrfs.Options{Devices: f.devices, SuperFallback: f.superFallback}, false, warn)
}

// warner returns the function that prints a command's warnings to its
// standard error with the command's prefix.
func warner(cmd *cobra.Command) func(string) {
	return func(msg string) { fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", cmd.CommandPath(), msg) }
}

// openImage opens the filesystem in image, read-only or writable: the
// one place every command opens an image, so that they all word a failed
// open alike.
//
// A filesystem opened without some of its devices is read degraded: each
// missing device is reported to warn (if not nil) in btrfs-progs' words,
// "warning, device 2 is missing".
func openImage(image string, opts *btrfs.Options, writable bool, warn func(string)) (*btrfs.FS, error) {
	// A missing image or a directory: say so in stat's words, before the
	// library wraps the error in its own context.
	fi, err := os.Stat(image)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: image, Err: syscall.EISDIR}
	}
	var fsys *btrfs.FS
	if writable {
		fsys, err = btrfs.OpenWritable(image, opts)
	} else {
		fsys, err = btrfs.Open(image, opts)
	}
	if err != nil && writable && errors.Is(err, btrfs.ErrUnsupported) {
		err = degradedWrite(image, opts, err)
	}
	if err != nil {
		return nil, notBtrfs(image, fi.Size(), err)
	}
	if warn != nil {
		for _, id := range fsys.MissingDevices() {
			warn(fmt.Sprintf("warning, device %d is missing", id))
		}
		for _, w := range fsys.Warnings() {
			warn("warning, " + w)
		}
	}
	return fsys, nil
}

// degradedWrite rewords the refusal to change a filesystem with devices
// missing: the library's error names its layers, the user needs to know
// which device to add.
func degradedWrite(image string, opts *btrfs.Options, err error) error {
	fsys, rerr := btrfs.Open(image, opts)
	if rerr != nil {
		return err
	}
	defer fsys.Close()
	missing := fsys.MissingDevices()
	if len(missing) == 0 {
		return err
	}
	ids := make([]string, len(missing))
	for i, id := range missing {
		ids[i] = fmt.Sprint(id)
	}
	return &fs.PathError{Op: "open", Path: image, Err: rewordedError{
		fmt.Sprintf("device %s missing: changes need every device (name the others with --device)", strings.Join(ids, ", ")), err}}
}

// notBtrfs rewords a failed open of something that is not btrfs at all
// by what it looks like ("ext4 filesystem, not btrfs"), where the library
// can only call the superblock corrupt. A btrfs image keeps its error.
func notBtrfs(image string, size int64, err error) error {
	f, oerr := os.Open(image)
	if oerr != nil {
		return err
	}
	defer f.Close()
	if size == 0 {
		// A block device stats as size 0; ask the device.
		if end, err := f.Seek(0, io.SeekEnd); err == nil {
			size = end
		}
	}
	what := ""
	found, ok := probe.Identify(f, size)
	switch {
	case ok && found.Type == "btrfs", probe.BtrfsMirror(f):
		// btrfs, damaged: the library's error says where.
		return &fs.PathError{Op: "open", Path: image, Err: err}
	case ok:
		what = found.What + ", not btrfs"
	case size < 1<<20:
		what = "too small to hold a btrfs filesystem"
	case probe.Zero(f, 1<<20):
		what = "no filesystem (only zeros where it would start)"
	default:
		what = "not a btrfs filesystem (no btrfs superblock, nothing else recognised)"
	}
	return &fs.PathError{Op: "open", Path: image, Err: rewordedError{what, err}}
}

// rewordedError says in the user's words why an image could not be
// opened (what it holds instead of btrfs, which device is missing); the
// library's error stays reachable for errors.Is.
type rewordedError struct {
	what string
	err  error
}

func (e rewordedError) Error() string { return e.what }
func (e rewordedError) Unwrap() error { return e.err }

// splitImagePath splits IMAGE[:PATH]. The image part is the longest prefix
// before a colon that names an existing file, so image paths may contain
// colons; PATH defaults to the top of the filesystem and is returned as an
// io/fs path ("." for the top). When nothing before a colon exists, and
// arg is no existing file either, the image is what comes before the last
// colon (not a drive letter): most likely a misspelled image name, which
// opening it then reports as missing.
func splitImagePath(arg string) (image, path string) {
	image, path = arg, "."
	found := false
	for i := len(arg) - 1; i >= 0; i-- {
		if arg[i] != ':' {
			continue
		}
		if _, err := os.Stat(arg[:i]); err == nil {
			image, path, found = arg[:i], arg[i+1:], true
			break
		}
	}
	if i := strings.LastIndexByte(arg, ':'); !found && i > 1 {
		if _, err := os.Lstat(arg); err != nil {
			image, path = arg[:i], arg[i+1:]
		}
	}
	path = strings.TrimPrefix(pathpkg.Clean("/"+path), "/")
	if path == "" {
		path = "."
	}
	return image, path
}
