package mkfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestBuildContextCancel stops a build whose context is done: the error
// is the context's, and the image holds a consistent filesystem.
func TestBuildContextCancel(t *testing.T) {
	btrfstest.RequireInterop(t)
	src := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(src, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	img := filepath.Join(t.TempDir(), "img")
	_, err := BuildContext(ctx, img, dirOpener(src), BuildOptions{Format: Options{Size: testSize}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	btrfstest.Check(t, []string{img}, true)
}
