package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/probe"
)

// mkfsCheckTarget makes mkfs.btrfs's checks of the image or device
// before anything is read from the input or written: a missing image
// needs a size (given, or measured from the input: sized); one the
// kernel has mounted, or another writer holds, is refused even with
// --force; one holding a filesystem or a partition table is refused
// without it, naming what it holds.
func mkfsCheckTarget(image string, sized, force bool) error {
	if _, err := os.Stat(image); errors.Is(err, os.ErrNotExist) {
		if !sized {
			return usagef("%s does not exist; give --byte-count (-b) to create it", image)
		}
		return nil
	} else if err != nil {
		return err
	}
	// Opening for writing claims the file as mkfs's own formatting will
	// (the writer lock and the kernel-mount check), without writing.
	d, err := blockdev.OpenFile(image, false)
	if err != nil {
		return err
	}
	d.Close()
	f, err := os.Open(image)
	if err != nil {
		return err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	found, ok := probe.Identify(f, size)
	if !ok || force {
		return nil
	}
	var what string
	switch {
	case found.Type == "gpt":
		what = "a GPT partition table"
	case found.Type == "dos":
		what = "an MBR partition table"
	case found.Filesystem:
		what = article(found.What) + " " + found.What
	default:
		return nil // an archive or a disk image format: not what mkfs.btrfs probes for
	}
	return fmt.Errorf("%s holds %s; use -f (--force) to overwrite it", image, what)
}

// article is "a" or "an" for the word w starts with.
func article(w string) string {
	if w != "" && strings.ContainsRune("aeiouAEIOU", rune(w[0])) || strings.HasPrefix(w, "NTFS") || strings.HasPrefix(w, "xfs") {
		return "an"
	}
	return "a"
}

// mkfsCheckNotInside refuses an image inside the directory it is made
// from (`--rootdir .` with the image there): the copy would read the
// image while writing it. Paths are compared after resolving symlinks
// of the directories; the image need not exist yet.
func mkfsCheckNotInside(image, rootDir string) error {
	if rootDir == "" {
		return nil
	}
	root, err := filepath.Abs(rootDir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil // OpenDir reports a missing or unreadable input
	}
	img, err := filepath.Abs(image)
	if err != nil {
		return nil
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(img)); err == nil {
		img = filepath.Join(dir, filepath.Base(img))
	}
	if img == root || strings.HasPrefix(img, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator)) {
		return usagef("%s is inside the input directory %s: the image would contain itself", image, rootDir)
	}
	return nil
}
