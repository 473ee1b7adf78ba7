package check

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// runCounting is Run, also returning how many runs the data-reference
// and name sorters spilled to temporary files.
func runCounting(t testing.TB, devs []string, opts Options) (Report, int, error) {
	t.Helper()
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	set, err := blockdev.ScanWith(devs, blockdev.ScanOptions{})
	if err != nil {
		return Report{}, 0, err
	}
	defer set.Close()
	c, err := newChecker(context.Background(), set, opts)
	if err != nil {
		return Report{}, 0, err
	}
	defer c.dataRefs.Close()
	err = c.run()
	return c.report, c.dataRefs.Runs() + int(c.nameRuns.Load()), err
}

// sameReport fails unless a tiny memory limit (every few references
// spilled) gives exactly the report of an unlimited run.
func sameReport(t *testing.T, img string, dataCsum bool) (spilled int) {
	t.Helper()
	want, _, errWant := runCounting(t, []string{img}, Options{DataCsum: dataCsum, MemoryLimit: 1 << 40})
	got, runs, errGot := runCounting(t, []string{img}, Options{DataCsum: dataCsum, MemoryLimit: 1})
	if (errWant == nil) != (errGot == nil) {
		t.Fatalf("unlimited: %v; tiny limit: %v", errWant, errGot)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("tiny memory limit changes the report:\nunlimited:\n%s\ntiny (%d runs):\n%s", problemsText(want), runs, problemsText(got))
	}
	return runs
}

// TestCheckSpilledSameReport: on every committed fixture (kernel- and
// mkfs-made) and every btrfs-progs fsck image (damaged ones included), a
// 1-byte MemoryLimit makes the checker spill its data references to
// temporary files, and the report is identical to an unlimited run's.
func TestCheckSpilledSameReport(t *testing.T) {
	for _, name := range btrfstest.FixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			img := btrfstest.OpenFixture(t, name)
			if runs := sameReport(t, img, true); runs == 0 {
				t.Fatal("nothing spilled")
			}
		})
	}
	for _, img := range btrfstest.FsckImages(t) {
		t.Run(img.Name, func(t *testing.T) {
			sameReport(t, btrfstest.RestoreFsckImage(t, img.Name), false)
		})
	}
}

// TestCheckSpilledKernelManyFiles: a kernel-made filesystem with many
// files, snapshots (shared data references) and quotas gives the same
// report with a tiny memory limit as without one.
func TestCheckSpilledKernelManyFiles(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	mnt := btrfstest.Mount(t, "", img)
	for d := 0; d < 20; d++ {
		dir := filepath.Join(mnt, "d", string(rune('a'+d)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 250; i++ {
			if err := os.WriteFile(filepath.Join(dir, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), make([]byte, 4096+i), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	btrfstest.Unmount(t, mnt)
	if runs := sameReport(t, img, true); runs < 100 {
		t.Fatalf("%d runs spilled, want many", runs)
	}
	if rep := withoutStaleFreeSpaceInfo(runCheck(t, img, true)); !rep.Clean() {
		t.Fatalf("kernel image not clean:\n%s", problemsText(rep))
	}
}

// TestNameEncodingOrder: the encoding of names sorts as the names do and
// decodes back, NUL bytes and prefixes included.
func TestNameEncodingOrder(t *testing.T) {
	names := []string{"", "\x00", "\x00\x00", "\x00a", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\xff", "\xff\x00"}
	for i, a := range names {
		ea := appendName(nil, []byte(a))
		if got, rest := splitName(append(ea, 9)); string(got) != a || len(rest) != 1 {
			t.Fatalf("%q decodes as %q rest %x", a, got, rest)
		}
		for j, b := range names {
			eb := appendName(nil, []byte(b))
			if c := bytes.Compare(ea, eb); (c < 0) != (i < j) || (c == 0) != (i == j) {
				t.Fatalf("%q vs %q: encodings compare %d", a, b, c)
			}
		}
	}
}

// TestDupNamesStreamed: a name given twice in one directory is reported
// once per extra DIR_INDEX, with that index's key, whether or not the
// records spilled; the same name in two directories is not a dup.
func TestDupNamesStreamed(t *testing.T) {
	for _, limit := range []int64{1, 1 << 30} {
		f := &fsTree{t: treeRoot{id: 5}, dirIndexNames: newSorter(limit, t.TempDir())}
		add := func(dir disk.ObjectID, name string, idx uint64) {
			f.addDirIndexName(dir, []byte(name), disk.Key{ObjectID: dir, Type: disk.DirIndexKey, Offset: idx})
		}
		for i := 0; i < 50; i++ {
			add(256, "f"+strconv.Itoa(i), uint64(2+i))
			add(257, "f"+strconv.Itoa(i), uint64(2+i))
		}
		add(256, "f7", 100)
		add(256, "f7", 101)
		add(257, "f7\x00", 102)
		if err := f.dupNames(); err != nil {
			t.Fatal(err)
		}
		f.dirIndexNames.Close()
		if len(f.out) != 2 || f.out[0].Key.Offset != 100 || f.out[1].Key.Offset != 101 || !strings.Contains(f.out[0].Message, `inode 256 errors: dup filename "f7"`) {
			t.Fatalf("limit %d: %+v", limit, f.out)
		}
	}
}
