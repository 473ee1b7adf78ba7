//go:build !unix

package extract

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"
)

// checkHostName refuses names this host would read as something else: a
// path separator or drive/stream colon would put the entry outside its
// directory, and the other characters Windows reserves cannot be created.
func checkHostName(name string) error {
	if i := strings.IndexFunc(name, func(c rune) bool {
		return c < 0x20 || strings.ContainsRune(`\/:*?"<>|`, c)
	}); i >= 0 {
		return fmt.Errorf("name %q: %q cannot be in a file name on %s: %w", name, name[i], runtime.GOOS, errors.ErrUnsupported)
	}
	if strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") {
		return fmt.Errorf("name %q: a name ending in a dot or space is changed by %s: %w", name, runtime.GOOS, errors.ErrUnsupported)
	}
	if reservedDeviceName(name) {
		return fmt.Errorf("name %q: names a device on %s (writing it would not make a file): %w", name, runtime.GOOS, errors.ErrUnsupported)
	}
	return nil
}

// chmodHost sets what the host keeps of the mode: on Windows only the
// write bit, as the read-only attribute.
func chmodHost(dst string, mode uint32) error { return os.Chmod(dst, fs.FileMode(mode&0o777)) }

// setTimes sets atime and mtime; a symlink's own times cannot be set
// without following it, so they are left as created.
func setTimes(dst string, atime, mtime time.Time, isLink bool) error {
	if isLink {
		return nil
	}
	return os.Chtimes(dst, atime, mtime)
}

// mknodHost cannot make device nodes, fifos or sockets here.
func mknodHost(string, uint32, uint32, uint32) error {
	return fmt.Errorf("special file not representable on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// applyXattrs skips the attributes: the host has none that map to
// Linux's. Each entry that has some is reported once through skip.
func (r *runner) applyXattrs(name, dst string) {
	xs, err := r.fsys.Xattrs(name)
	if err != nil {
		r.fail(name, dst, err)
		return
	}
	if len(xs) > 0 {
		r.skip(name, fmt.Errorf("%d extended attributes not representable on %s: %w", len(xs), runtime.GOOS, errors.ErrUnsupported))
	}
}
