//go:build linux

package btrfstest

import (
	"os"
	"testing"
)

// PopulateSubvolumes creates dir/subvols with subvolumes and snapshots
// (dir must be on btrfs; uses the btrfs tool):
//
//	sv             subvolume with files and a directory
//	sv/nested      subvolume inside sv
//	sv/d/deep      subvolume inside a plain directory of sv
//	snap-ro        read-only snapshot of sv, taken before the changes below
//	snap-rw        writable snapshot of sv taken after them, then changed
//
// After snap-ro, sv is changed: a file rewritten, one deleted, one added,
// one renamed, one chmodded, one truncated. In the snapshots the nested
// subvolumes appear as empty directories (the kernel's placeholder).
// With setDefault, sv/nested becomes the default subvolume, so a mount
// without subvol options shows it as the root ("subvolid=5" shows all).
func PopulateSubvolumes(tb testing.TB, dir string, seed int64, setDefault bool) {
	tb.Helper()
	p := newPopulator(tb, dir, "subvols", seed)
	p.subvolume("sv")
	p.write("sv/keep", p.random(5000))
	p.write("sv/rewrite", p.random(20000))
	p.write("sv/delete", p.text(3000))
	p.write("sv/rename", p.random(100))
	p.write("sv/chmod", p.random(100))
	p.write("sv/truncate", p.random(100000))
	p.mkdir("sv/d", 0o755)
	p.write("sv/d/inner", p.random(700))
	p.subvolume("sv/nested")
	p.write("sv/nested/file", p.random(9000))
	p.subvolume("sv/d/deep")
	p.write("sv/d/deep/file", p.text(300))
	p.snapshot("sv", "snap-ro", true)

	p.write("sv/rewrite", p.random(30000))
	p.check(os.Remove(p.path("sv/delete")))
	p.write("sv/added", p.random(4000))
	p.check(os.Rename(p.path("sv/rename"), p.path("sv/d/renamed")))
	p.check(os.Chmod(p.path("sv/chmod"), 0o600))
	p.check(os.Truncate(p.path("sv/truncate"), 4097))
	p.snapshot("sv", "snap-rw", false)
	p.write("snap-rw/only-in-rw", p.random(100))
	p.check(os.Remove(p.path("snap-rw/keep")))
	if setDefault {
		mustRun(p.tb, "btrfs", "subvolume", "set-default", p.path("sv/nested"))
	}
}

func (p *populator) subvolume(rel string) {
	p.tb.Helper()
	mustRun(p.tb, "btrfs", "subvolume", "create", p.path(rel))
}

func (p *populator) snapshot(src, rel string, readOnly bool) {
	p.tb.Helper()
	args := []string{"subvolume", "snapshot"}
	if readOnly {
		args = append(args, "-r")
	}
	mustRun(p.tb, "btrfs", append(args, p.path(src), p.path(rel))...)
}
