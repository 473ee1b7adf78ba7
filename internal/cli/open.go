package cli

import (
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

// open opens the filesystem in image read-only.
func (f *fsFlags) open(image string) (*btrfs.FS, error) {
	return openImage(image, &btrfs.Options{Devices: f.devices, SuperFallback: f.superFallback}, false)
}

// openImage opens the filesystem in image, read-only or writable: the
// one place every command opens an image, so that they all word a failed
// open alike.
func openImage(image string, opts *btrfs.Options, writable bool) (*btrfs.FS, error) {
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
	if err != nil {
		return nil, notBtrfs(image, fi.Size(), err)
	}
	return fsys, nil
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
	return &fs.PathError{Op: "open", Path: image, Err: notBtrfsError{what, err}}
}

// notBtrfsError says what an image holds instead of btrfs; the library's
// error stays reachable for errors.Is.
type notBtrfsError struct {
	what string
	err  error
}

func (e notBtrfsError) Error() string { return e.what }
func (e notBtrfsError) Unwrap() error { return e.err }

// splitImagePath splits IMAGE[:PATH]. The image part is the longest prefix
// before a colon that names an existing file, so image paths may contain
// colons; PATH defaults to the top of the filesystem and is returned as an
// io/fs path ("." for the top).
func splitImagePath(arg string) (image, path string) {
	image, path = arg, "."
	for i := len(arg) - 1; i >= 0; i-- {
		if arg[i] != ':' {
			continue
		}
		if _, err := os.Stat(arg[:i]); err == nil {
			image, path = arg[:i], arg[i+1:]
			break
		}
	}
	path = strings.TrimPrefix(pathpkg.Clean("/"+path), "/")
	if path == "" {
		path = "."
	}
	return image, path
}
