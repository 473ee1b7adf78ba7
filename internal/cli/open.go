package cli

import (
	"io/fs"
	"os"
	pathpkg "path"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
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
	if writable {
		return btrfs.OpenWritable(image, opts)
	}
	return btrfs.Open(image, opts)
}

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
