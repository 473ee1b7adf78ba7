package mkfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestBuildSubvol makes directories of the input subvolumes: the kernel
// lists them as subvolumes and shows exactly the input in them, and two
// reproducible builds are identical.
func TestBuildSubvol(t *testing.T) {
	btrfstest.RequireInterop(t)
	src := t.TempDir()
	files := map[string]string{
		"home/user/notes.txt": "notes", "home/user/empty": "", "srv/www/index.html": "<html>",
		"srv/other": "not in a subvolume", "etc/hostname": "box",
	}
	for p, data := range files {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(src, "home/user/notes.txt"), filepath.Join(src, "home/notes-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "home"), 0o711); err != nil {
		t.Fatal(err)
	}
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	opts := BuildOptions{Subvolumes: []string{"home", "srv/www"}, PrePass: true, Reproducible: true,
		Epoch: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	img := buildImage(t, dirOpener(src), opts)
	btrfstest.Check(t, []string{img}, true)
	mnt := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if d := btrfstest.Diff(want, got, btrfstest.DiffOptions{CompareNlink: true}); len(d) > 0 {
		t.Errorf("image differs from the input:\n%s", strings.Join(d, "\n"))
	}
	out, err := exec.Command("btrfs", "subvolume", "list", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("subvolume list: %v\n%s", err, out)
	}
	for _, sv := range []string{"path home\n", "path srv/www\n"} {
		if !strings.Contains(string(out), sv) {
			t.Errorf("subvolume list lacks %q:\n%s", sv, out)
		}
	}
	btrfstest.Unmount(t, mnt)
	again := buildImage(t, dirOpener(src), opts)
	a, _ := os.ReadFile(img)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two reproducible builds with subvolumes differ")
	}

	// A subvolume the input does not have is an error naming it.
	bad := opts
	bad.Subvolumes = []string{"nowhere"}
	bad.Format.Size = testSize
	if _, err := Build(filepath.Join(t.TempDir(), "img"), dirOpener(src), bad); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("missing subvolume directory: %v", err)
	}
}
