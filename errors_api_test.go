package btrfs_test

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// formatTemp makes a fresh image of size bytes with the library's mkfs.
func formatTemp(t *testing.T, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: size}); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestReadOnlyChangesAreEROFS: every change to an FS opened with Open is
// refused with an error matching syscall.EROFS (as Linux answers writes to
// a read-only mount) and fs.ErrPermission (as os does for a file opened
// read-only), naming the operation and path.
func TestReadOnlyChangesAreEROFS(t *testing.T) {
	img := formatTemp(t, 128<<20)
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("f", []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)

	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	f, err := ro.OpenFile("f")
	if err != nil {
		t.Fatal(err)
	}
	changes := map[string]func() error{
		"mkdir":     func() error { return ro.Mkdir("d", 0o755) },
		"writefile": func() error { return ro.WriteFile("g", nil, 0o644) },
		"remove":    func() error { return ro.Remove("f") },
		"setxattr":  func() error { return ro.Setxattr("f", "user.a", []byte("b")) },
		"writeat":   func() error { _, err := f.WriteAt([]byte("x"), 0); return err },
		"commit":    ro.Commit,
		"rollback":  ro.Rollback,
		"setlabel":  func() error { return ro.SetLabel("x") },
		"counters":  func() error { _, err := ro.WriteCounters(); return err },
	}
	for name, change := range changes {
		err := change()
		if !errors.Is(err, syscall.EROFS) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("%s on a read-only FS: %v, want EROFS and fs.ErrPermission", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "read-only file system") {
			t.Errorf("%s: message %q does not say read-only", name, err)
		}
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestErrNoSpace writes more data than a small image holds: the error
// matches ErrNoSpace and syscall.ENOSPC, and the image stays as the last
// commit left it, which btrfs check accepts.
func TestErrNoSpace(t *testing.T) {
	img := formatTemp(t, 128<<20)
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.CreateEmpty("big", 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = fsys.WriteFrom("big", io.LimitReader(zeros{}, 256<<20), 0)
	if err == nil {
		err = fsys.Commit()
	}
	if !errors.Is(err, btrfs.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing 256 MiB into a 128 MiB image: %v, want ErrNoSpace", err)
	}
	fsys.Close() // may repeat the error; the image is the last commit
	btrfstest.Check(t, []string{img}, true)
}

// TestErrUnsupported: what gobtrfs cannot do matches ErrUnsupported (and
// the standard library's errors.ErrUnsupported), and the message names the
// feature.
func TestErrUnsupported(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fs.img")
	err := mkfs.Format(img, mkfs.Options{Size: 128 << 20, Csum: btrfs.CsumType(9)})
	if !errors.Is(err, btrfs.ErrUnsupported) || !errors.Is(err, mkfs.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("mkfs with checksum type 9: %v, want ErrUnsupported", err)
	}
	if !strings.Contains(err.Error(), "checksum type 9") {
		t.Errorf("message %q does not name the checksum type", err)
	}
}

// TestPublicTypesRoundTrip covers the small public types mkfs.Options
// takes instead of the internal ones.
func TestPublicTypesRoundTrip(t *testing.T) {
	const s = "0b7e5e0a-6f1c-4d2e-9a3b-5c4d3e2f1a0b"
	u, err := btrfs.ParseUUID(s)
	if err != nil || u.String() != s || u.IsZero() {
		t.Errorf("ParseUUID(%q) = %v, %v", s, u, err)
	}
	if _, err := btrfs.ParseUUID("not-a-uuid"); err == nil {
		t.Error("ParseUUID accepted garbage")
	}
	for in, want := range map[string]btrfs.CsumType{"": btrfs.CsumCRC32C, "CRC32C": btrfs.CsumCRC32C,
		"xxhash": btrfs.CsumXXHash, "xxhash64": btrfs.CsumXXHash, "sha256": btrfs.CsumSHA256, "blake2b": btrfs.CsumBlake2} {
		if got, err := btrfs.ParseCsumType(in); err != nil || got != want {
			t.Errorf("ParseCsumType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := btrfs.ParseCsumType("md5"); err == nil {
		t.Error("ParseCsumType accepted md5")
	}
	if got := btrfs.CsumBlake2.String(); got != "blake2b" {
		t.Errorf("CsumBlake2 = %q", got)
	}
}
