package fileio

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// ImageSize is the size of the image the command makes for c when it does
// not exist: twice the files (copy-on-write needs new space for a block
// before the old one is freed at a commit, and the fsync-less runs keep
// everything until the end) plus 1 GiB for metadata and chunk rounding.
// Image files are sparse, so the room costs nothing until used.
func ImageSize(c Config) (int64, error) {
	r, err := c.resolve()
	if err != nil {
		return 0, err
	}
	return 2*r.fileSize*int64(r.FileNum) + 1<<30, nil
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

// hashImage returns the SHA-256 of the image's bytes, in hex.
func hashImage(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
