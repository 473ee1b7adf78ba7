package btrfs_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// preparedSizes cross every boundary PrepareData decides on: empty,
// inline (compressed or not), just past max_inline, a sector and around
// it, a compressed piece and around it, several pieces with a tail.
var preparedSizes = []int{0, 1, 100, 2047, 2048, 2049, 4095, 4096, 4097, 65536 + 7,
	128<<10 - 1, 128 << 10, 128<<10 + 1, 1<<20 + 123}

// preparedContent is n bytes that compress (text-like) or not (random),
// so both outcomes of every compression decision occur.
func preparedContent(rng *rand.Rand, n int, random bool) []byte {
	b := make([]byte, n)
	if random {
		rng.Read(b)
		return b
	}
	words := []string{"btrfs ", "extent ", "tree ", "checksum ", "inode ", "\n"}
	for i := 0; i < n; {
		i += copy(b[i:], words[rng.Intn(len(words))])
	}
	return b
}

// TestWritePreparedSameImage writes the same files into two copies of one
// image, once with WriteAt and once with PrepareData (made on other
// goroutines) and WritePrepared, and wants byte-identical images: the
// prepared path must store exactly what the plain one does. It also
// covers writes where the preparation does not apply (an unaligned
// offset, the middle of existing data, a NOCOMPRESS file).
func TestWritePreparedSameImage(t *testing.T) {
	for _, comp := range []string{"", "zstd", "zlib", "lzo"} {
		t.Run("compress="+comp, func(t *testing.T) {
			base := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
			src, err := os.ReadFile(base)
			if err != nil {
				t.Fatal(err)
			}
			var images [2]string
			for i := range images {
				images[i] = filepath.Join(t.TempDir(), fmt.Sprintf("img%d", i))
				if err := os.WriteFile(images[i], src, 0o644); err != nil {
					t.Fatal(err)
				}
				writePreparedFiles(t, images[i], comp, i == 1)
			}
			a, _ := os.ReadFile(images[0])
			b, _ := os.ReadFile(images[1])
			if !bytes.Equal(a, b) {
				for i := range a {
					if a[i] != b[i] {
						t.Fatalf("images differ first at byte %d", i)
					}
				}
			}
			btrfstest.Check(t, []string{images[1]}, true)
		})
	}
}

// writePreparedFiles writes the test's files into img and commits.
func writePreparedFiles(t *testing.T, img, comp string, prepared bool) {
	clock := time.Unix(1700000000, 0)
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: comp, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	rng := rand.New(rand.NewSource(1))
	type file struct {
		name string
		data []byte
		off  int64
	}
	var files []file
	for i, n := range preparedSizes {
		for _, random := range []bool{false, true} {
			files = append(files, file{fmt.Sprintf("f%02d-%v", i, random), preparedContent(rng, n, random), 0})
		}
	}
	// Writes the preparation does not fit: unaligned, inside data, and a
	// NOCOMPRESS file; the results must still be right.
	files = append(files, file{files[len(files)-1].name, preparedContent(rng, 5000, false), 1000})
	files = append(files, file{files[len(files)-2].name, preparedContent(rng, 9000, false), 8192})
	mustOK(t, fsys.CreateEmpty("nocomp", 0o644))
	mustOK(t, fsys.SetInodeFlags("nocomp", uint64(disk.InodeNoCompress), 0))
	files = append(files, file{"nocomp", preparedContent(rng, 300<<10, false), 0})

	pds := make([]*btrfs.PreparedData, len(files))
	if prepared {
		var wg sync.WaitGroup
		for i := range files {
			wg.Go(func() {
				pd, err := fsys.PrepareData(files[i].data)
				if err != nil {
					t.Error(err)
				}
				pds[i] = pd
			})
		}
		wg.Wait()
	}
	for i, f := range files {
		if _, err := fsys.Stat(f.name); err != nil {
			mustOK(t, fsys.CreateEmpty(f.name, 0o644))
		}
		if prepared {
			if n, err := fsys.WritePrepared(f.name, pds[i], f.off); err != nil || n != len(f.data) {
				t.Fatalf("WritePrepared %s: %d, %v", f.name, n, err)
			}
		} else if _, err := fsys.WriteAt(f.name, f.data, f.off); err != nil {
			t.Fatal(err)
		}
	}
	mustOK(t, fsys.Commit())
	// What was written reads back.
	want := map[string][]byte{}
	for _, f := range files {
		b := want[f.name]
		if end := int(f.off) + len(f.data); end > len(b) {
			b = append(b, make([]byte, end-len(b))...)
		}
		copy(b[f.off:], f.data)
		want[f.name] = b
	}
	for name, w := range want {
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil || !bytes.Equal(got, w) {
			t.Fatalf("%s reads back %d bytes (%v), want %d", name, len(got), err, len(w))
		}
	}
}

// TestPrepareDataConcurrent prepares on several goroutines while changes
// and commits run (the race detector watches), and PrepareData on a
// read-only FS fails.
func TestPrepareDataConcurrent(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	out := make(chan *btrfs.PreparedData, 4)
	go func() {
		defer close(out)
		rng := rand.New(rand.NewSource(2))
		for i := range 40 {
			pd, err := fsys.PrepareData(preparedContent(rng, 1000+i*3000, i%3 == 0))
			if err != nil {
				t.Error(err)
				return
			}
			out <- pd
		}
	}()
	i := 0
	for pd := range out {
		name := fmt.Sprintf("c%d", i)
		mustOK(t, fsys.CreateEmpty(name, 0o644))
		if _, err := fsys.WritePrepared(name, pd, 0); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			mustOK(t, fsys.Commit())
		}
		i++
	}
	mustOK(t, fsys.Commit())
	fsys.Close()
	btrfstest.Check(t, []string{img}, true)

	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.PrepareData([]byte("x")); err == nil {
		t.Fatal("PrepareData on a read-only FS succeeded")
	}
}
