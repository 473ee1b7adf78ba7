package mkfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBuildFailureUndone stops builds whose context is done after the
// image was formatted: the error is the context's, an image the build
// created is gone, and an existing image file (here an earlier image,
// with a hole) has its former bytes, size and modification time back.
func TestBuildFailureUndone(t *testing.T) {
	src := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(src, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The context ends once the image is formatted: the first entry's
	// check between entries sees it.
	build := func(img string) error {
		ctx, cancel := context.WithCancel(context.Background())
		opts := BuildOptions{Format: Options{Size: testSize}, PrePass: true,
			OnSummary: func(*Summary) { cancel() }}
		_, err := BuildContext(ctx, img, dirOpener(src), opts)
		return err
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "new.img")
	if err := build(img); !errors.Is(err, context.Canceled) {
		t.Fatalf("new image: err %v, want context.Canceled", err)
	}
	if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the image a failed build created is still there (%v)", err)
	}

	old := filepath.Join(dir, "old.img")
	if _, err := Build(old, dirOpener(src), BuildOptions{Format: Options{Size: testSize}, PrePass: true}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(old, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("tail"), testSize+1<<20) // past a hole, grows the file
	f.Close()
	before, _ := os.ReadFile(old)
	fi0, _ := os.Stat(old)
	if err := build(old); !errors.Is(err, context.Canceled) {
		t.Fatalf("existing image: err %v, want context.Canceled", err)
	}
	after, _ := os.ReadFile(old)
	fi1, _ := os.Stat(old)
	if !bytes.Equal(before, after) || fi1.Size() != fi0.Size() || !fi1.ModTime().Equal(fi0.ModTime()) {
		t.Errorf("existing image changed by a failed build: %d -> %d bytes, equal %v, mtime %v -> %v",
			fi0.Size(), fi1.Size(), bytes.Equal(before, after), fi0.ModTime(), fi1.ModTime())
	}

	// A target written full of zeros (dd from /dev/zero) with a few
	// bytes in the middle: the zeros are not copied aside, and read back
	// the same.
	zeros := filepath.Join(dir, "zeros.img")
	data := make([]byte, testSize)
	copy(data[3<<20+5:], "marker")
	if err := os.WriteFile(zeros, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := build(zeros); !errors.Is(err, context.Canceled) {
		t.Fatalf("zero-filled image: err %v, want context.Canceled", err)
	}
	if got, _ := os.ReadFile(zeros); !bytes.Equal(got, data) {
		t.Errorf("zero-filled image not put back")
	}
}
