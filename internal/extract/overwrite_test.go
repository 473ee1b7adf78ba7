package extract

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestRunIntoExistingTree checks what Run does with a destination that
// is in the way: a file where dst should be a directory fails (nothing
// extracted is no success), an existing file fails naming it unless
// Overwrite replaces it, existing directories are merged into.
func TestRunIntoExistingTree(t *testing.T) {
	fsys, err := btrfs.Open(btrfstest.OpenFixture(t, "rootdir-16k-crc32c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("host"), 0o644)
	if _, err := Run(ctx, fsys, "regular", file, Options{}); err == nil {
		t.Errorf("extracting a file into a file: no error")
	}
	out := filepath.Join(dir, "out")
	if _, err := Run(ctx, fsys, ".", out, Options{}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(out, "regular"), []byte("changed"), 0o644)
	_, err = Run(ctx, fsys, ".", out, Options{})
	var xe *Error
	if !errors.As(err, &xe) || len(xe.Failures) == 0 {
		t.Fatalf("second run over the same tree: %v", err)
	}
	for _, f := range xe.Failures {
		if !errors.Is(f.Err, fs.ErrExist) || f.Dest != filepath.Join(out, f.Path) {
			t.Errorf("failure %+v: want EEXIST naming its destination", f)
		}
	}
	if _, err := Run(ctx, fsys, ".", out, Options{Overwrite: true}); err != nil {
		t.Fatalf("Overwrite: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "regular")); string(b) == "changed" {
		t.Errorf("Overwrite left the host's file")
	}
}
