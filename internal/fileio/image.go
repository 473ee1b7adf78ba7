package fileio

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// ImageSize is the size of the image the command makes for c when it does
// not exist: three times the files plus 1 GiB for metadata and chunk
// rounding. Copy-on-write needs new space for a block before the old one
// is freed at a commit, and a data extent stays whole while any part of
// it is referenced (btrfs's bookend extents): the prepared files are
// written as a few large extents, as the kernel's delayed allocation
// writes them, so random overwrites free nothing until an extent is
// overwritten completely. Image files are sparse, so the room costs
// nothing until used; longer runs may want a larger image (make it with
// gobtrfs mkfs first).
func ImageSize(c Config) (int64, error) {
	r, err := c.resolve()
	if err != nil {
		return 0, err
	}
	files := r.fileSize * int64(r.FileNum)
	return 3*files + 1<<30, nil
}

// copyImage copies the image at src to dst, leaving holes where src has
// zeros (images are sparse; a dense copy of a large image would cost its
// whole size on the host).
func copyImage(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	for off := int64(0); ; {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				return err
			}
		}
		off += int64(n)
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := out.Truncate(st.Size()); err != nil {
		return err
	}
	return out.Sync()
}

// sameImages compares the images at a and b byte for byte and returns
// the CRC-32C of their bytes (a fingerprint for the results; the
// comparison itself is exact). Reading is the cost: a hash as strong as
// SHA-256 would take several times longer on a large sparse image.
func sameImages(a, b string) (string, error) {
	fa, err := os.Open(a)
	if err != nil {
		return "", err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return "", err
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	var sum uint32
	tab := crc32.MakeTable(crc32.Castagnoli)
	for off := int64(0); ; {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return "", fmt.Errorf("%s and %s differ in the MiB at %d", a, b, off)
		}
		sum = crc32.Update(sum, tab, ba[:na])
		off += int64(na)
		if ea != nil || eb != nil {
			if (errors.Is(ea, io.EOF) || errors.Is(ea, io.ErrUnexpectedEOF)) && (errors.Is(eb, io.EOF) || errors.Is(eb, io.ErrUnexpectedEOF)) {
				return fmt.Sprintf("%08x", sum), nil
			}
			return "", errors.Join(ea, eb)
		}
	}
}
