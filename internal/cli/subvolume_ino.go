package cli

import (
	"io/fs"

	"github.com/gobtrfs/btrfs"
)

// isSubvolume reports whether fi is the top directory of a subvolume:
// btrfs gives every subvolume root inode number 256. The top of the
// filesystem view is one too; callers treat "." apart.
func isSubvolume(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*btrfs.Stat)
	return ok && fi.IsDir() && st.Ino == 256
}

// isPlaceholder reports whether fi is the empty directory a snapshot
// shows for a subvolume nested in its source (inode 2, as on Linux).
func isPlaceholder(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*btrfs.Stat)
	return ok && fi.IsDir() && st.Ino == 2
}
