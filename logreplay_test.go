package btrfs_test

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

func logMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// logRootOf is the log_root of img's primary superblock.
func logRootOf(t *testing.T, img string) uint64 {
	t.Helper()
	f, err := blockdev.OpenFile(img, true)
	logMust(t, err)
	defer f.Close()
	sb, _, err := blockdev.ReadSuper(f, 0)
	logMust(t, err)
	return uint64(sb.LogRoot)
}

func fileSum(t *testing.T, p string) [32]byte {
	b, err := os.ReadFile(p)
	logMust(t, err)
	return sha256.Sum256(b)
}

var logDiff = btrfstest.DiffOptions{CompareNlink: true, IgnoreHoles: true}

func diffTrees(t *testing.T, what string, want, got *btrfstest.Tree) {
	t.Helper()
	for _, d := range btrfstest.Diff(want, got, logDiff) {
		t.Errorf("%s: %s", what, d)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i/4096)
	}
	return b
}

// TestLogReplayFixtures replays the committed log fixtures (made by the
// kernel, see TestGenLogFixtures) without root or a kernel: the read-only
// open shows what the kernel showed after its replay (the manifest) and
// leaves the image alone; the writable open replays, shows the same,
// writes on; the result opens again with our change and no log.
func TestLogReplayFixtures(t *testing.T) {
	names := btrfstest.LogFixtureNames(t)
	if len(names) == 0 {
		t.Fatal("no log fixtures in testdata/images")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			img := btrfstest.OpenFixture(t, name)
			if logRootOf(t, img) == 0 {
				t.Fatal("fixture has no log tree")
			}
			want := btrfstest.LoadManifest(t, name)
			before := fileSum(t, img)
			ro, err := btrfs.Open(img, nil)
			logMust(t, err)
			diffTrees(t, "read-only open vs kernel", want, ops2Read(t, ro))
			logMust(t, ro.Close())
			if fileSum(t, img) != before {
				t.Fatal("read-only open changed the image")
			}
			last, err := btrfs.Open(img, &btrfs.Options{NoLogReplay: true})
			logMust(t, err)
			if len(btrfstest.Diff(want, ops2Read(t, last), logDiff)) == 0 {
				t.Error("the last commit already shows what the kernel shows: nothing to replay")
			}
			logMust(t, last.Close())
			if _, err := btrfs.OpenWritable(img, &btrfs.Options{NoLogReplay: true}); err == nil {
				t.Fatal("OpenWritable with NoLogReplay accepted")
			}

			fsys, err := btrfs.OpenWritable(img, nil)
			logMust(t, err)
			diffTrees(t, "writable open vs kernel", want, ops2Read(t, fsys))
			logMust(t, fsys.WriteFile("ours", pattern(30000, 3), 0o644))
			logMust(t, fsys.Close())
			if logRootOf(t, img) != 0 {
				t.Fatal("log_root still set after the replay")
			}
			again, err := btrfs.Open(img, nil)
			logMust(t, err)
			got := ops2Read(t, again)
			logMust(t, again.Close())
			if got.Entries["ours"] == nil {
				t.Error("our file is gone after reopening")
			}
			delete(got.Entries, "ours")
			opts := logDiff
			opts.IgnoreDirMtime = true // our file changed the top directory
			for _, d := range btrfstest.Diff(want, got, opts) {
				t.Errorf("reopened vs kernel: %s", d)
			}
			if _, err := exec.LookPath("btrfs"); err == nil {
				btrfstest.Check(t, []string{img}, true)
			}
		})
	}
}
