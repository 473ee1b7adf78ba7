//go:build linux

package btrfs_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// TestTreeLogKernelReplay: File.Sync of files that only data writes
// changed writes a tree log instead of a commit; a crash right after
// leaves an image whose superblock names the log, and the kernel's mount
// replays it: the synced files read as they were at their Sync, the one
// written but not synced as at the last commit, and btrfs check is clean
// afterwards. The image that was closed normally holds everything.
func TestTreeLogKernelReplay(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, tc := range []struct {
		name string
		opts btrfs.Options
	}{
		{"plain", btrfs.Options{}},
		{"zstd", btrfs.Options{Compress: "zstd"}},
		// Every item of the file logged again at each fsync (the
		// measurement switch): refs and all extents in the log.
		{"rebuild", btrfs.Options{TreeLogRebuild: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			// Our mkfs: btrfs-progs 6.19's check finds free-space items
			// of removed chunks in kernel-written images of mkfs.btrfs
			// 6.2, which has nothing to do with the log.
			img := filepath.Join(t.TempDir(), "img")
			if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20}); err != nil {
				t.Fatal(err)
			}
			opts := tc.opts
			opts.CommitInterval = -1
			fsys, err := btrfs.OpenWritable(img, &opts)
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					fsys.Close()
				}
			})
			// Room in the data and metadata chunks for what follows:
			// a transaction that adds a chunk commits at fsync.
			if err := fsys.WriteFile("filler", make([]byte, 96<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove("filler"); err != nil {
				t.Fatal(err)
			}
			// seq takes sector-aligned appends, which grow one extent
			// across its Syncs (growPrevious) and so change an item a
			// synced log holds.
			names := []string{"a", "b", "c", "small", "seq"}
			content := map[string][]byte{}
			for _, n := range names {
				size := 64<<10 + rng.IntN(512<<10)
				switch n {
				case "small":
					size = 1000
				case "seq":
					size = 64 << 10
				}
				b := make([]byte, size)
				for i := range b {
					b[i] = byte(rng.IntN(4)) // compressible
				}
				if err := fsys.WriteFile(n, b, 0o644); err != nil {
					t.Fatal(err)
				}
				content[n] = b
			}
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
			committed := map[string][]byte{}
			for n, b := range content {
				committed[n] = bytes.Clone(b)
			}
			files := map[string]*btrfs.File{}
			for _, n := range names {
				f, err := fsys.OpenFile(n)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				files[n] = f
			}
			write := func(n string, rounds int) {
				for range rounds {
					cur := content[n]
					off := rng.IntN(len(cur) + 8192)
					if rng.IntN(4) == 0 {
						off = len(cur) // append
					}
					p := make([]byte, 1+rng.IntN(40000))
					for i := range p {
						p[i] = byte(rng.Uint32())
					}
					if _, err := files[n].WriteAt(p, int64(off)); err != nil {
						t.Fatal(err)
					}
					if end := off + len(p); end > len(cur) {
						cur = append(cur, make([]byte, end-len(cur))...)
					}
					copy(cur[off:], p)
					content[n] = cur
				}
			}
			appendSeq := func(rounds int) {
				for range rounds {
					p := make([]byte, 8192)
					for i := range p {
						p[i] = byte(rng.Uint32())
					}
					if _, err := files["seq"].WriteAt(p, int64(len(content["seq"]))); err != nil {
						t.Fatal(err)
					}
					content["seq"] = append(content["seq"], p...)
				}
			}
			synced := map[string][]byte{}
			sync := func(n string) {
				if err := files[n].Sync(); err != nil {
					t.Fatal(err)
				}
				synced[n] = bytes.Clone(content[n])
			}
			write("a", 20)
			write("b", 5)
			write("small", 3)
			sync("a")
			write("b", 10)
			sync("b")
			write("a", 4) // again, synced again below
			sync("a")
			sync("small")
			appendSeq(10)
			sync("seq")
			appendSeq(10) // into the extent the log holds
			sync("seq")
			appendSeq(5)  // after its sync
			write("c", 8) // never synced
			write("b", 3) // after its sync

			wc, err := fsys.WriteCounters()
			if err != nil {
				t.Fatal(err)
			}
			// A log sync takes every file written since the last one,
			// so a later Sync may find its file in the log already.
			if wc.LogSyncs < 3 || wc.LogSyncs > 6 || wc.Commits != 2 {
				t.Fatalf("%d log syncs and %d commits, want 3 to 6 and 2 (the Commits above)", wc.LogSyncs, wc.Commits)
			}
			crash := copyFile(t, img, "crash.img") // as a power loss would leave it: what the FS wrote
			if logRootOf(t, crash) == 0 {
				t.Fatal("the crash copy's superblock names no log tree")
			}
			// btrfs-progs 6.19 checks log trees too.
			btrfstest.CheckNewer(t, crash, true)

			// The image closed normally holds everything.
			for _, f := range files {
				f.Close()
			}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			closed = true
			if r := logRootOf(t, img); r != 0 {
				t.Fatalf("closed image still names log tree %d", r)
			}
			btrfstest.Check(t, []string{img}, true)
			compareMounted(t, img, content)
			if ro, err := btrfs.Open(img, nil); err != nil {
				t.Fatal(err)
			} else {
				exts, err := ro.FileExtents("seq")
				ro.Close()
				if err != nil {
					t.Fatal(err)
				}
				if tc.opts.Compress == "" && len(exts) != 2 {
					t.Errorf("seq: %d extents, want 2 (the committed one and one of the 25 appends): %+v", len(exts), exts)
				}
			}

			// The crash copy, replayed by our read-only open (into
			// memory) and by the kernel.
			want := map[string][]byte{}
			for n := range content {
				want[n] = committed[n]
				if b, ok := synced[n]; ok {
					want[n] = b
				}
			}
			ro, err := btrfs.Open(crash, nil)
			if err != nil {
				t.Fatal(err)
			}
			for n, b := range want {
				got, err := ro.ReadFile(n)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, b) {
					t.Errorf("%s: our replay reads %d bytes, want %d (first difference at %d)", n, len(got), len(b), firstDiff(got, b))
				}
			}
			ro.Close()
			compareMounted(t, crash, want)
			if r := logRootOf(t, crash); r != 0 {
				t.Fatalf("kernel mount left log tree %d", r)
			}
			btrfstest.Check(t, []string{crash}, true)
			btrfstest.CheckNewer(t, crash, true)
		})
	}
}

// compareMounted mounts img with the kernel and compares each file with
// want.
func compareMounted(t *testing.T, img string, want map[string][]byte) {
	t.Helper()
	dir := btrfstest.Mount(t, "", img)
	defer btrfstest.Unmount(t, dir)
	for n, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s: kernel reads %d bytes, want %d (first difference at %d)", n, len(got), len(b), firstDiff(got, b))
		}
	}
}
