package cli

import (
	"errors"
	"io/fs"

	"github.com/gobtrfs/btrfs"
)

// What the editing words refuse to do to subvolumes until the write API
// can (rm -r, rmdir and mv of a subvolume), said plainly.

// errSubvolume is why rm -r and mv refuse a subvolume: the write API
// cannot delete or move subvolumes yet, and saying so beats the EXDEV or
// "cross-device" wording the library reports.
var errSubvolume = errors.New("is a subvolume; removing and moving subvolumes is not supported yet")

// isSubvolume reports whether fi is the top directory of a subvolume:
// btrfs gives every subvolume root inode number 256. The top of the
// filesystem view is one too; callers treat "." apart.
func isSubvolume(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*btrfs.Stat)
	return ok && fi.IsDir() && st.Ino == 256
}
