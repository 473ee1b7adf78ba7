//go:build linux

package btrfstest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestInteropRule: a missing requirement skips, except under
// GOBTRFS_INTEROP=1 where it fails.
func TestInteropRule(t *testing.T) {
	t.Setenv(btrfstest.InteropEnv, "")
	r := record(t, func(tb testing.TB) { btrfstest.SkipOrFail(tb, "no loop devices") })
	if !r.skipped || r.failed || !strings.Contains(r.msg, "no loop devices") {
		t.Errorf("without %s: skipped=%v failed=%v msg=%q, want a skip", btrfstest.InteropEnv, r.skipped, r.failed, r.msg)
	}
	t.Setenv(btrfstest.InteropEnv, "1")
	r = record(t, func(tb testing.TB) { btrfstest.SkipOrFail(tb, "no loop devices") })
	if r.skipped || !r.failed || !strings.Contains(r.msg, "no loop devices") {
		t.Errorf("with %s=1: skipped=%v failed=%v msg=%q, want a failure", btrfstest.InteropEnv, r.skipped, r.failed, r.msg)
	}
}

// TestCheck: btrfs check passes on a fresh image and on a multi-device one,
// and Check fails the test when the image is damaged.
func TestCheck(t *testing.T) {
	btrfstest.RequireProgs(t)
	t.Parallel()
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Csum: "blake2", NodeSize: 4096})
	btrfstest.Check(t, []string{img}, true)
	if btrfstest.Interop() {
		devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: 3, DataProfile: "raid1c3", MetadataProfile: "raid1"})
		btrfstest.Check(t, devs, true)
	}
	// Damage the primary superblock (64 KiB in) inside its checksummed area.
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("garbage"), 0x10000+0x300)
	must(t, err)
	must(t, f.Close())
	r := record(t, func(tb testing.TB) { btrfstest.Check(tb, []string{img}, false) })
	if !r.failed || !strings.Contains(r.msg, "btrfs check") {
		t.Fatalf("Check on a damaged image: failed=%v msg=%q, want a failure with the check output", r.failed, r.msg)
	}
	t.Logf("damaged image reported as expected: %.200s", r.msg)
}
