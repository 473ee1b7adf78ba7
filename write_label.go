package btrfs

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/gobtrfs/btrfs/internal/disk"
)

// SetLabel sets the filesystem's label, written into the superblocks at
// the next commit (Info and Label read the committed one until then), as
// `btrfs filesystem label` and `btrfs property set ... label` do. A label
// is at most 255 bytes without NUL bytes (EINVAL otherwise, as the
// kernel says).
func (fsys *FS) SetLabel(label string) error {
	if len(label) >= disk.LabelSize || strings.IndexByte(label, 0) >= 0 {
		return &fs.PathError{Op: "set label", Path: label, Err: fmt.Errorf("%w: a label is at most %d bytes without NUL", fs.ErrInvalid, disk.LabelSize-1)}
	}
	return fsys.change("set label", ".", func(c *wctx) (bool, error) {
		// The superblock is the whole change; the commit writes it.
		return true, c.t.SetLabel(label)
	})
}

// Label returns the label of the last commit.
func (fsys *FS) Label() string {
	fsys, done := fsys.reader()
	defer done()
	return fsys.sb.LabelString()
}
