package btrfs_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/extract"
)

// The committed fixtures were made by mkfs.btrfs and by the kernel; their
// manifests record what the kernel's mount showed. These tests need neither.

func TestFixturesExtractMatchesKernel(t *testing.T) {
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			img := btrfstest.OpenFixture(t, name)
			fsys, err := btrfs.Open(img, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			dst := t.TempDir()
			out := dst + "/x"
			if _, err := extract.Run(context.Background(), fsys, ".", out, extract.Options{}); err != nil {
				t.Fatalf("extract: %v", err)
			}
			got, err := btrfstest.Scan(out)
			if err != nil {
				t.Fatal(err)
			}
			want := btrfstest.LoadManifest(t, name)
			opts := btrfstest.DiffOptions{
				IgnoreOwners: os.Geteuid() != 0,
				// The host cannot hold btrfs properties, nor trusted./security.
				// attributes without root.
				IgnoreXattr: func(n string) bool {
					return strings.HasPrefix(n, "btrfs.") || os.Geteuid() != 0 && !strings.HasPrefix(n, "user.")
				},
			}
			for _, d := range btrfstest.Diff(want, got, opts) {
				t.Error(d)
			}
		})
	}
}

func TestFixturesAPIMatchesManifest(t *testing.T) {
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fsys, err := btrfs.Open(btrfstest.OpenFixture(t, name), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			want := btrfstest.LoadManifest(t, name)
			for _, p := range want.Paths() {
				e := want.Entries[p]
				fi, err := fsys.Lstat(p)
				if err != nil {
					t.Errorf("%s: %v", p, err)
					continue
				}
				st := fi.Sys().(*btrfs.Stat)
				if uint32(fi.Mode().Perm()) != e.Perm&0o777 || st.UID != e.UID || st.GID != e.GID {
					t.Errorf("%s: mode %v uid %d gid %d, want perm %o uid %d gid %d", p, fi.Mode(), st.UID, st.GID, e.Perm, e.UID, e.GID)
				}
				if e.Type != btrfstest.TypeDir && fi.ModTime().UnixNano() != e.MtimeNs {
					t.Errorf("%s: mtime %d, want %d", p, fi.ModTime().UnixNano(), e.MtimeNs)
				}
				if e.Type == btrfstest.TypeRegular {
					f, err := fsys.OpenFile(p)
					if err != nil {
						t.Errorf("%s: %v", p, err)
						continue
					}
					h := sha256.New()
					if _, err := io.Copy(h, f); err != nil {
						t.Errorf("%s: read: %v", p, err)
					}
					if got := fmt.Sprintf("%x", h.Sum(nil)); got != e.SHA256 {
						t.Errorf("%s: sha256 %s, want %s", p, got, e.SHA256)
					}
				}
			}
		})
	}
}

func TestFixturesIOFS(t *testing.T) {
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fsys, err := btrfs.Open(btrfstest.OpenFixture(t, name), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			var files []string
			dangling := map[string]bool{}
			fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					files = append(files, p)
				}
				if err == nil && d.Type()&fs.ModeSymlink != 0 {
					if _, serr := fsys.Stat(p); errors.Is(serr, fs.ErrNotExist) {
						dangling[p] = true
					}
				}
				return nil
			})
			err = fstest.TestFS(fsys, files...)
			if err == nil {
				return
			}
			// TestFS opens every entry, which must fail for a dangling
			// symlink (as with os.DirFS); every other complaint counts.
			for _, line := range strings.Split(err.Error(), "\n") {
				line = strings.TrimSpace(line)
				p, _, _ := strings.Cut(line, ": Open:")
				if line == "" || line == "TestFS found errors:" || dangling[p] {
					continue
				}
				t.Error(line)
			}
		})
	}
}
