package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestCheckKernelImage: an image the kernel wrote with what our writer
// cannot make yet (snapshots sharing blocks, then both sides changed, so
// blocks get full backrefs and shared refs; quotas; a deleted subvolume;
// compression; prealloc) is clean by our check exactly when btrfs check
// calls it clean.
func TestCheckKernelImage(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	mnt := btrfstest.Mount(t, "compress=zstd", img)
	sh := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	sh("btrfs", "quota", "enable", mnt)
	sh("btrfs", "subvolume", "create", filepath.Join(mnt, "sub"))
	btrfstest.PopulateFiles(t, filepath.Join(mnt, "sub"), 1)
	btrfstest.PopulateLinks(t, filepath.Join(mnt, "sub"), 2)
	sh("btrfs", "subvolume", "snapshot", filepath.Join(mnt, "sub"), filepath.Join(mnt, "snap"))
	sh("btrfs", "subvolume", "snapshot", "-r", filepath.Join(mnt, "sub"), filepath.Join(mnt, "ro"))
	// Change both sides of the snapshot so shared blocks are COWed.
	for _, side := range []string{"snap", "sub"} {
		dir := filepath.Join(mnt, side, "more")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		btrfstest.PopulateFiles(t, dir, 3)
		sh("sh", "-c", "for f in "+filepath.Join(mnt, side)+"/files/*; do [ -f \"$f\" ] && dd if=/dev/urandom of=\"$f\" bs=4k count=1 conv=notrunc status=none; done; true")
	}
	sh("fallocate", "-l", "1M", filepath.Join(mnt, "sub", "prealloc"))
	sh("btrfs", "subvolume", "create", filepath.Join(mnt, "gone"))
	if err := os.WriteFile(filepath.Join(mnt, "gone", "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	sh("sync")
	sh("btrfs", "subvolume", "delete", filepath.Join(mnt, "gone"))
	sh("btrfs", "quota", "rescan", "-w", mnt)
	btrfstest.Unmount(t, mnt)

	progsClean := btrfstest.CheckStatus(t, img) == 0
	rep := withoutStaleFreeSpaceInfo(runCheck(t, img, true))
	if rep.Clean() != progsClean {
		t.Fatalf("ours clean=%v, btrfs check clean=%v:\n%s", rep.Clean(), progsClean, problemsText(rep))
	}
	if !rep.Clean() {
		t.Fatalf("kernel image not clean:\n%s", problemsText(rep))
	}
}
