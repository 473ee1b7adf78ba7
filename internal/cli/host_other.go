//go:build !unix

package cli

import (
	"io/fs"
	"os"
	"time"
)

// chmodHost sets what the host keeps of the mode (on Windows, the write
// bit as the read-only attribute).
func chmodHost(p string, mode uint32) error { return os.Chmod(p, fs.FileMode(mode&0o777)) }

// touchHost sets atime and mtime of p to t; a symlink's own times cannot
// be set without following it, so they stay as created.
func touchHost(p string, t time.Time, isLink bool) error {
	if isLink {
		return nil
	}
	return os.Chtimes(p, t, t)
}
