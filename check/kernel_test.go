package check

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"golang.org/x/sys/unix"
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
	// A higher-level qgroup holding the subvolume and its snapshot.
	sh("btrfs", "qgroup", "create", "1/100", mnt)
	sh("btrfs", "qgroup", "assign", "--no-rescan", "0/256", "1/100", mnt)
	sh("btrfs", "qgroup", "assign", "--no-rescan", "0/257", "1/100", mnt)
	sh("btrfs", "quota", "rescan", "-w", mnt)
	btrfstest.Unmount(t, mnt)

	// The counts are compared only when the kernel left them consistent.
	c := openChecker(t, img)
	leaf, slot := findItem(t, c, disk.QuotaTreeObjectID, func(k disk.Key, _ []byte) bool { return k.Type == disk.QgroupStatusKey })
	var st disk.QgroupStatusItem
	must(t, st.Decode(leaf.ItemData(slot)))
	if st.Flags&(disk.QgroupStatusInconsistent|disk.QgroupStatusRescan) != 0 {
		t.Fatalf("quota status %s: the counts would not be compared", disk.QgroupStatusFlagsString(st.Flags))
	}
	progsClean := btrfstest.CheckStatus(t, img) == 0
	rep := withoutStaleFreeSpaceInfo(runCheck(t, img, true))
	if rep.Clean() != progsClean {
		t.Fatalf("ours clean=%v, btrfs check clean=%v:\n%s", rep.Clean(), progsClean, problemsText(rep))
	}
	if !rep.Clean() {
		t.Fatalf("kernel image not clean:\n%s", problemsText(rep))
	}

	// A qgroup count off by a block is found.
	leaf, slot = findItem(t, c, disk.QuotaTreeObjectID, func(k disk.Key, _ []byte) bool {
		return k.Type == disk.QgroupInfoKey && k.Offset == 256
	})
	var qi disk.QgroupInfoItem
	must(t, qi.Decode(leaf.ItemData(slot)))
	qi.Rfer += 4096
	qi.Encode(leaf.ItemData(slot))
	writeBlock(t, c, img, leaf, true)
	if rep := runCheck(t, img, false); !hasProblem(rep, KindQuota, "Counts for qgroup id: 0/256 are different") {
		t.Fatalf("qgroup count off by a block not found:\n%s", problemsText(rep))
	}
}

// TestCheckMultiDevice: a RAID1 filesystem on two image files is clean
// when checked with both devices.
func TestCheckMultiDevice(t *testing.T) {
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: 2, DataProfile: "raid1", MetadataProfile: "raid1"})
	rep, err := Run(context.Background(), devs, Options{DataCsum: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep = withoutStaleFreeSpaceInfo(rep); !rep.Clean() {
		t.Fatalf("false alarm:\n%s", problemsText(rep))
	}
}

// TestCheckDataMirrors: a filesystem with DUP data made by mkfs.btrfs
// --rootdir is clean, and a data byte flipped in only the second copy is
// found by DataCsum (every mirror is read), not without it.
func TestCheckDataMirrors(t *testing.T) {
	root := t.TempDir()
	data := make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	if err := os.WriteFile(filepath.Join(root, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{DataProfile: "dup", MetadataProfile: "dup", RootDir: root})
	devs := []string{img}
	rep, err := Run(context.Background(), devs, Options{DataCsum: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep = withoutStaleFreeSpaceInfo(rep); !rep.Clean() {
		t.Fatalf("false alarm:\n%s", problemsText(rep))
	}
	c := openCheckerDevs(t, devs)
	ino := func() disk.ObjectID {
		leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, d []byte) bool {
			if k.Type != disk.InodeRefKey {
				return false
			}
			refs, err := disk.ParseInodeRefs(d)
			return err == nil && len(refs) == 1 && string(refs[0].Name) == "f"
		})
		return leaf.Key(slot).ObjectID
	}()
	leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, _ []byte) bool {
		return k.ObjectID == ino && k.Type == disk.ExtentDataKey
	})
	var fe disk.FileExtentItem
	must(t, fe.Decode(leaf.ItemData(slot)))
	mp, err := c.m.Mirrors(fe.DiskBytenr+disk.LogicalAddr(fe.Offset)+4096, 1)
	must(t, err)
	if len(mp.Copies) != 2 {
		t.Fatalf("%d copies, want 2", len(mp.Copies))
	}
	flipByte(t, img, int64(mp.Copies[1].Physical))
	rep, err = Run(context.Background(), devs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep = withoutStaleFreeSpaceInfo(rep); !rep.Clean() {
		t.Fatalf("metadata-only check found data damage:\n%s", problemsText(rep))
	}
	rep, err = Run(context.Background(), devs, Options{DataCsum: true})
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(rep, KindDataCsum, "mirror 2") {
		t.Fatalf("damaged second copy not found:\n%s", problemsText(rep))
	}
}

// TestCheckHolesPastEOF: without NO_HOLES, a gap in the file extents past
// i_size (fallocate KEEP_SIZE beyond EOF) is legal, as btrfs check says;
// a hole below i_size with no file extent is found.
func TestCheckHolesPastEOF(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Features: "^no-holes"})
	mnt := btrfstest.Mount(t, "", img)
	sh := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	// A tail past EOF with a gap before it.
	pastEOF := filepath.Join(mnt, "pasteof")
	if err := os.WriteFile(pastEOF, make([]byte, 129329), 0o644); err != nil {
		t.Fatal(err)
	}
	sh("fallocate", "-n", "-o", "139264", "-l", "8192", pastEOF)
	// A hole below EOF: the kernel writes a hole file extent for it.
	holey := filepath.Join(mnt, "holey")
	if err := os.WriteFile(holey, []byte("head"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh("sh", "-c", "printf tail | dd of="+holey+" bs=1 seek=200000 conv=notrunc status=none")
	var st unix.Stat_t
	must(t, unix.Stat(holey, &st))
	holeyIno := disk.ObjectID(st.Ino)
	btrfstest.Unmount(t, mnt)

	if btrfstest.CheckStatus(t, img) != 0 {
		t.Fatal("btrfs check finds the kernel's image unclean")
	}
	if rep := withoutStaleFreeSpaceInfo(runCheck(t, img, true)); !rep.Clean() {
		t.Fatalf("kernel image with a gap past EOF not clean:\n%s", problemsText(rep))
	}

	// Drop the hole extent of the file with a hole below EOF.
	c := openChecker(t, img)
	leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, data []byte) bool {
		if k.ObjectID != holeyIno || k.Type != disk.ExtentDataKey {
			return false
		}
		var fe disk.FileExtentItem
		return fe.Decode(data) == nil && fe.Type == disk.FileExtentReg && fe.DiskBytenr == 0
	})
	deleteItem(leaf, slot)
	writeBlock(t, c, img, leaf, true)
	if rep := runCheck(t, img, false); !hasProblem(rep, KindInode, "file extent discount") {
		t.Fatalf("hole below EOF without a file extent not found:\n%s", problemsText(rep))
	}
	if btrfstest.CheckStatus(t, img) == 0 {
		t.Fatal("btrfs check finds the damaged image clean")
	}
}

// TestCheckDataParity: RAID5 and RAID6 sets written by the kernel are
// clean with DataCsum, which rebuilds every data sector from P (and
// compares Q); a byte flipped in P is then found as "mirror 2", one in Q
// as "mirror 3", and neither without DataCsum.
func TestCheckDataParity(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, tc := range []struct {
		profile string
		devices int
	}{{"raid5", 3}, {"raid6", 4}} {
		t.Run(tc.profile, func(t *testing.T) {
			devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: tc.devices, DataProfile: tc.profile, MetadataProfile: "raid1"})
			data := make([]byte, 1<<20)
			for i := range data {
				data[i] = byte(i*13 + i>>10)
			}
			mnt := btrfstest.Mount(t, "", devs...)
			must(t, os.WriteFile(filepath.Join(mnt, "f"), data, 0o644))
			btrfstest.Unmount(t, mnt)
			rep, err := Run(context.Background(), devs, Options{DataCsum: true})
			must(t, err)
			if rep = withoutStaleFreeSpaceInfo(rep); !rep.Clean() {
				t.Fatalf("false alarm:\n%s", problemsText(rep))
			}
			c := openCheckerDevs(t, devs)
			leaf, slot := findItem(t, c, disk.FSTreeObjectID, func(k disk.Key, _ []byte) bool {
				return k.ObjectID == 257 && k.Type == disk.ExtentDataKey
			})
			var fe disk.FileExtentItem
			must(t, fe.Decode(leaf.ItemData(slot)))
			mp, err := c.m.Mirrors(fe.DiskBytenr+disk.LogicalAddr(fe.Offset)+4096, 1)
			must(t, err)
			loc, want := mp.P, "mirror 2"
			if tc.profile == "raid6" {
				loc, want = mp.Q, "mirror 3"
			}
			if loc.Stripe < 0 {
				t.Fatalf("no parity in the mapping of %d", mp.Logical)
			}
			flipByte(t, devs[loc.DevID-1], int64(loc.Physical))
			rep, err = Run(context.Background(), devs, Options{})
			must(t, err)
			if rep = withoutStaleFreeSpaceInfo(rep); !rep.Clean() {
				t.Fatalf("metadata-only check found data damage:\n%s", problemsText(rep))
			}
			rep, err = Run(context.Background(), devs, Options{DataCsum: true})
			must(t, err)
			if !hasProblem(rep, KindDataCsum, want) {
				t.Fatalf("damaged parity not found (%s):\n%s", want, problemsText(rep))
			}
		})
	}
}
