package blockdev_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// memOpener serves named in-memory devices to ScanWith.
func memOpener(devs map[string]blockdev.Device) func(string, bool) (blockdev.Device, error) {
	return func(p string, _ bool) (blockdev.Device, error) {
		d, ok := devs[p]
		if !ok {
			return nil, errors.New("no such device")
		}
		return d, nil
	}
}

func newMemSuper(t *testing.T, ts testSuper) *blockdev.Mem {
	d := blockdev.NewMem(2 << 20)
	ts.writeSupers(t, d)
	return d
}

func TestScan(t *testing.T) {
	fs := disk.UUID{0xf5}
	devs := map[string]blockdev.Device{
		"a":     newMemSuper(t, testSuper{fsid: fs, devid: 1, dev: disk.UUID{1}, gen: 10}),
		"b":     newMemSuper(t, testSuper{fsid: fs, devid: 2, dev: disk.UUID{2}, gen: 10}),
		"stale": newMemSuper(t, testSuper{fsid: fs, devid: 3, dev: disk.UUID{3}, gen: 8}),
		"other": newMemSuper(t, testSuper{fsid: disk.UUID{0xaa}, devid: 4, dev: disk.UUID{4}, gen: 10}),
		"clash": newMemSuper(t, testSuper{fsid: fs, devid: 2, dev: disk.UUID{9}, gen: 10}),
		"blank": blockdev.NewMem(2 << 20),
		"short": newMemSuper(t, testSuper{fsid: fs, devid: 5, dev: disk.UUID{5}, gen: 10, size: 3 << 20}),
	}
	open := memOpener(devs)
	s, err := blockdev.ScanWith([]string{"stale", "a", "b", "a"}, blockdev.ScanOptions{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	if s.FSID != fs || s.Super.Generation != 10 || s.Super.DevItem.DevID != 1 {
		t.Fatalf("set %s gen %d from devid %d", s.FSID, s.Super.Generation, s.Super.DevItem.DevID)
	}
	if !slices.Equal(s.DevIDs(), []disk.DevID{1, 2}) || len(s.Devices()) != 2 {
		t.Fatalf("devids %v", s.DevIDs())
	}
	if len(s.Stale) != 2 || s.Stale[0].Path != "stale" || len(s.Warnings) != 2 {
		t.Fatalf("stale %d, warnings %q", len(s.Stale), s.Warnings)
	}
	if m := s.Missing([]disk.DevID{3, 1, 2, 3}); !slices.Equal(m, []disk.DevID{3}) {
		t.Fatalf("missing %v", m)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = blockdev.ScanWith([]string{"short"}, blockdev.ScanOptions{Open: open})
	if err != nil || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "truncated") {
		t.Fatalf("short device: %v %q", err, s.Warnings)
	}

	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"a", "other"}, "other: belongs to filesystem"},
		{[]string{"a", "b", "clash"}, "both claim devid 2"},
		{[]string{"a", "blank"}, "blank: "},
		{[]string{"a", "nope"}, "open nope"},
		{nil, "no devices"},
	} {
		// Fresh devices: a failed scan closes what it opened.
		for k, ts := range map[string]testSuper{
			"a": {fsid: fs, devid: 1, dev: disk.UUID{1}, gen: 10}, "b": {fsid: fs, devid: 2, dev: disk.UUID{2}, gen: 10},
		} {
			devs[k] = newMemSuper(t, ts)
		}
		_, err := blockdev.ScanWith(tc.paths, blockdev.ScanOptions{Open: open})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("scan %v: error %v, want %q", tc.paths, err, tc.want)
		}
		if _, err := devs["a"].ReadAt(make([]byte, 1), 0); len(tc.paths) > 0 && !errors.Is(err, blockdev.ErrClosed) {
			t.Fatalf("scan %v left device a open", tc.paths)
		}
	}
}

func TestScanSuperFallback(t *testing.T) {
	d := blockdev.NewMem(70 << 20)
	testSuper{fsid: disk.UUID{1}, devid: 1, gen: 5}.writeSupers(t, d)
	d.WriteAt(make([]byte, 4096), disk.SuperblockOffset)
	open := memOpener(map[string]blockdev.Device{"d": d.Clone()})
	if _, err := blockdev.ScanWith([]string{"d"}, blockdev.ScanOptions{Open: open}); !errors.Is(err, disk.ErrCorrupt) {
		t.Fatalf("bad primary without fallback: %v", err)
	}
	open = memOpener(map[string]blockdev.Device{"d": d})
	s, err := blockdev.ScanWith([]string{"d"}, blockdev.ScanOptions{Open: open, SuperFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Members[1].SuperCopy != 1 || len(s.Warnings) != 1 {
		t.Fatalf("copy %d warnings %q", s.Members[1].SuperCopy, s.Warnings)
	}
}

// TestScanOneBehind: a device one generation behind (a commit's
// superblock writes cut by a power loss) is used, with a warning, and the
// superblock comes from a device at the newest generation even when the
// behind one is named first.
func TestScanOneBehind(t *testing.T) {
	fs := disk.UUID{0xf6}
	devs := map[string]blockdev.Device{
		"behind": newMemSuper(t, testSuper{fsid: fs, devid: 1, dev: disk.UUID{1}, gen: 9}),
		"new":    newMemSuper(t, testSuper{fsid: fs, devid: 2, dev: disk.UUID{2}, gen: 10}),
	}
	s, err := blockdev.ScanWith([]string{"behind", "new"}, blockdev.ScanOptions{Open: memOpener(devs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Super.Generation != 10 || s.Super.DevItem.DevID != 2 {
		t.Fatalf("super gen %d from devid %d", s.Super.Generation, s.Super.DevItem.DevID)
	}
	if !slices.Equal(s.DevIDs(), []disk.DevID{1, 2}) || len(s.Stale) != 0 || len(s.Warnings) != 1 {
		t.Fatalf("devids %v, stale %d, warnings %q", s.DevIDs(), len(s.Stale), s.Warnings)
	}
}
