package fileio

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// smallConfig is a run small enough for a test: 8 files of 512 KiB, 4 KiB
// blocks, 8 threads, a few hundred events, fsync every 20 requests, data
// verified.
func smallConfig(t *testing.T, mode string) Config {
	t.Helper()
	c := Config{Image: filepath.Join(t.TempDir(), "img"), Mode: mode, FileNum: 8, FileTotalSize: 4 << 20,
		FileBlockSize: 4096, FsyncFreq: 20, Threads: 8, Events: 400, Time: -1, Verify: true}
	size, err := ImageSize(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := mkfs.Format(c.Image, mkfs.Options{Size: size}); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRunModes(t *testing.T) {
	for _, mode := range Modes {
		t.Run(mode, func(t *testing.T) {
			c := smallConfig(t, mode)
			res, err := Run(c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Events != 400 {
				t.Errorf("events %d, want 400", res.Events)
			}
			t.Logf("%+v", res.Total)
			btrfstest.Check(t, []string{c.Image}, true)
		})
	}
}

// TestRunUnprepared: a run refuses an image without the files, or with
// files shorter than the configuration wants.
func TestRunUnprepared(t *testing.T) {
	c := smallConfig(t, RndWr)
	other := c
	other.FileTotalSize *= 2
	if _, err := Run(other); err == nil || !strings.Contains(err.Error(), "prepare with the same") {
		t.Errorf("files too short: %v", err)
	}
	other = c
	other.FileNum *= 2
	other.FileTotalSize *= 2
	if _, err := Run(other); err == nil || !strings.Contains(err.Error(), "prepare the files first") {
		t.Errorf("files missing: %v", err)
	}
}
