//go:build linux

package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// reflinkCheck tries what --reflink needs of the host before anything
// is written: cloning a file of dir into a file beside image. mkfs.btrfs
// fails when the host cannot (the input and the image on different
// filesystems, or one that does not clone), and so does this, with the
// host's reason. The build then clones every data extent's whole sectors
// from the input (mkfs.BuildOptions.Reflink).
func reflinkCheck(dir, image string) error {
	src, err := firstRegular(dir)
	if err != nil {
		return fmt.Errorf("--reflink: %w", err)
	}
	if src == "" {
		return nil // nothing to clone
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("--reflink: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(image), ".gobtrfs-reflink-*")
	if err != nil {
		return fmt.Errorf("--reflink: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := unix.IoctlFileClone(int(tmp.Fd()), int(in.Fd())); err != nil {
		return fmt.Errorf("--reflink: cannot clone %s into the filesystem of %s: %w", src, image, err)
	}
	return nil
}

// firstRegular returns a non-empty regular file below dir, "" if none.
func firstRegular(dir string) (string, error) {
	found := ""
	stop := errors.New("found")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil && fi.Size() > 0 {
				found = p
				return stop
			}
		}
		return nil
	})
	if err == stop {
		err = nil
	}
	return found, err
}
