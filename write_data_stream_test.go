package btrfs_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// growDataSpace makes the filesystem allocate DATA chunks (by writing a
// file of size bytes, committed, then removed), so the random sequences
// run over committed chunks with freed space in them as well as over the
// chunks mkfs made.
func growDataSpace(t *testing.T, fsys *btrfs.FS, size int64) {
	if err := fsys.CreateEmpty("ballast", 0o600); err != nil {
		t.Fatal(err)
	}
	ballast := io.LimitReader(rand.New(rand.NewSource(1)), size) // incompressible
	if _, err := fsys.WriteFrom("ballast", ballast, 0); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove("ballast"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestDataNewChunkRMW rewrites part of a sector of data that went to a
// DATA chunk the running transaction added: the read-modify-write reads
// it before Commit.
func TestDataNewChunkRMW(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	const n = 30 << 20 // more than mkfs's 8 MiB data chunk
	if err := fsys.CreateEmpty("f", 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.WriteFrom("f", &patternReader{n: n}, 0); err != nil {
		t.Fatal(err)
	}
	_, err = fsys.WriteAt("f", []byte("patch"), n-10)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(&patternReader{n: n})
	copy(want[n-10:], "patch")
	got, err := fsys.ReadFile("f")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back before commit: %v", err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
}

// patternReader yields n deterministic bytes, half compressible.
type patternReader struct {
	n, pos int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.pos >= r.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n-r.pos)
	for i := range k {
		x := r.pos + i
		if (x>>16)&1 == 0 {
			p[i] = byte(x * 2654435761 >> 13)
		} else {
			p[i] = byte(x >> 10)
		}
	}
	r.pos += k
	return int(k), nil
}

// TestDataStreamInterop streams 64 MiB through WriteFrom (compressed and
// not) and checks the kernel reads it back exactly.
func TestDataStreamInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	const n = 64 << 20
	want := sha256.New()
	if _, err := io.Copy(want, &patternReader{n: n}); err != nil {
		t.Fatal(err)
	}
	for _, comp := range []string{"", "zstd"} {
		t.Run("compress="+comp, func(t *testing.T) {
			img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 512 << 20})
			fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: comp})
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			if err := fsys.CreateEmpty("big", 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got, err := fsys.WriteFrom("big", &patternReader{n: n}, 0)
			if err != nil || got != n {
				t.Fatalf("WriteFrom: %d %v", got, err)
			}
			t.Logf("64 MiB written in %v", time.Since(start))
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			btrfstest.Check(t, []string{img}, true)
			dir := btrfstest.Mount(t, "ro", img)
			fd, err := os.Open(filepath.Join(dir, "big"))
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			if _, err := io.Copy(h, fd); err != nil {
				t.Fatal(err)
			}
			fd.Close()
			if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
				t.Fatal("kernel reads other bytes than were streamed")
			}
		})
	}
}

// TestDataInlineSizesInterop writes files of every size 0..2049: up to
// 2048 bytes they are inline extents, then regular ones, as the kernel
// makes them; check and the kernel agree.
func TestDataInlineSizesInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.Mkdir("i", 0o755); err != nil {
		t.Fatal(err)
	}
	content := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		return b
	}
	for n := 0; n <= 2049; n++ {
		if err := fsys.WriteFile(fmt.Sprintf("i/%d", n), content(n), 0o644); err != nil {
			t.Fatal(n, err)
		}
	}
	for _, n := range []int{0, 1, 2048, 2049} {
		fi, err := fsys.Stat(fmt.Sprintf("i/%d", n))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*btrfs.Stat)
		want := uint64(n)
		if n == 2049 {
			want = 4096
		}
		if st.NBytes != want {
			t.Errorf("size %d: nbytes %d, want %d", n, st.NBytes, want)
		}
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	fsys.Close()
	btrfstest.Check(t, []string{img}, true)
	dir := btrfstest.Mount(t, "ro", img)
	for n := 0; n <= 2049; n++ {
		b, err := os.ReadFile(filepath.Join(dir, "i", fmt.Sprint(n)))
		if err != nil || !bytes.Equal(b, content(n)) {
			t.Fatalf("kernel: size %d: %v", n, err)
		}
	}
}
