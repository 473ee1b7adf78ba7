package mkfs

import (
	"errors"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// noAtimeFlag keeps reading the input from changing its access times.
const noAtimeFlag = unix.O_NOATIME

// hostXattrs reads every extended attribute of hp (not following a
// symlink), sorted by name.
func hostXattrs(hp string) ([]Xattr, error) {
	buf := make([]byte, 4096)
	var n int
	for {
		var err error
		n, err = unix.Llistxattr(hp, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, &os.PathError{Op: "llistxattr", Path: hp, Err: err}
		}
		break
	}
	var xs []Xattr
	for _, name := range splitNul(buf[:n]) {
		v, err := lgetxattr(hp, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, &os.PathError{Op: "lgetxattr " + name, Path: hp, Err: err}
		}
		xs = append(xs, Xattr{Name: name, Value: v})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
	return xs, nil
}

func lgetxattr(hp, name string) ([]byte, error) {
	size := 256
	for {
		buf := make([]byte, size)
		n, err := unix.Lgetxattr(hp, name, buf)
		if errors.Is(err, unix.ERANGE) && size < 1<<20 {
			size *= 4
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

func splitNul(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		if i > 0 {
			out = append(out, string(b[:i]))
		}
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}
