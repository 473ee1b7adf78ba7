package cli

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// Images written by the kernel through a loop mount, compared like the
// mkfs images: compression, reflinks, prealloc, subvolumes, snapshots, a
// default subvolume, many xattrs, extrefs, quotas with limits and
// relations, device statistics, a paused balance, a finished device
// replace and a log tree.

// btrfsCmd runs the btrfs tool for the setup of a test and fails it on error.
func btrfsCmd(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("btrfs", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("btrfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// addQuotas enables quotas with a limit, a level-1 qgroup and a relation,
// and resets the device statistics (which writes a dev stats item).
func addQuotas(t *testing.T, mnt string) {
	t.Helper()
	btrfsCmd(t, "quota", "enable", mnt)
	btrfsCmd(t, "qgroup", "limit", "100M", filepath.Join(mnt, "subvols/sv"))
	btrfsCmd(t, "qgroup", "limit", "-e", "50M", mnt)
	btrfsCmd(t, "qgroup", "create", "1/100", mnt)
	btrfsCmd(t, "qgroup", "assign", "--no-rescan", "0/256", "1/100", mnt)
	btrfsCmd(t, "quota", "rescan", "-w", mnt)
	btrfsCmd(t, "device", "stats", "-z", mnt)
	btrfsCmd(t, "filesystem", "sync", mnt)
}

// pauseBalance starts a full balance and pauses it as soon as it runs, so
// the image keeps a balance item (and possibly relocation trees). If the
// balance finishes first, the image simply has none.
func pauseBalance(t *testing.T, mnt string) {
	t.Helper()
	bal := exec.Command("btrfs", "balance", "start", "--full-balance", mnt)
	if err := bal.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	paused := false
	for !paused && time.Now().Before(deadline) {
		paused = exec.Command("btrfs", "balance", "pause", mnt).Run() == nil
	}
	_ = bal.Wait() // exits non-zero when paused
	if !paused {
		t.Logf("balance finished before it could be paused: no balance item in this image")
	}
}

// TestDumpKernelImages compares the commands with btrfs-progs on images
// populated by the kernel.
func TestDumpKernelImages(t *testing.T) {
	btrfstest.RequireInterop(t)
	t.Run("populated-16k", func(t *testing.T) {
		img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 1 << 30})
		mnt := btrfstest.Mount(t, "compress=zstd", img)
		btrfstest.PopulateAll(t, mnt, 11, btrfstest.PopulateOptions{SetDefault: true, BigDir: true, BigDirEntries: 3000})
		addQuotas(t, mnt)
		pauseBalance(t, mnt)
		btrfstest.Unmount(t, mnt)
		compareAll(t, []string{img}, "QGROUP_STATUS", "QGROUP_INFO", "QGROUP_LIMIT", "QGROUP_RELATION",
			"INODE_EXTREF", "XATTR_ITEM", "(zstd)", "(zlib)", "(lzo)", "prealloc data disk byte", "inline extent data size",
			"ROOT_REF", "ROOT_BACKREF", "DEV_STATS PERSISTENT_ITEM", "flags 0x1(RDONLY)", "ROOT_ITEM 18446744073709551615) type DIR")
	})
	t.Run("refs", func(t *testing.T) {
		img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096, Size: 1 << 30})
		mnt := btrfstest.Mount(t, "", img)
		populateRefs(t, mnt)
		btrfstest.Unmount(t, mnt)
		compareAll(t, []string{img}, "EXTENT_DATA_REF", "FREE_SPACE_BITMAP", "UUID_KEY_RECEIVED_SUBVOL",
			"FULL_BACKREF", "SHARED_DATA_REF", "node ")
	})
	t.Run("populated-4k-xxhash", func(t *testing.T) {
		img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096, Csum: "xxhash", Size: 512 << 20})
		mnt := btrfstest.Mount(t, "compress=lzo", img)
		btrfstest.PopulateFiles(t, mnt, 12)
		btrfstest.PopulateExtents(t, mnt, 12)
		btrfstest.PopulateCompressed(t, mnt, 12)
		btrfstest.PopulateLinks(t, mnt, 12)
		btrfstest.PopulateXattrs(t, mnt, 12)
		btrfstest.PopulateNames(t, mnt, 12)
		btrfstest.PopulateSpecial(t, mnt, 12)
		btrfstest.PopulateSubvolumes(t, mnt, 12, false)
		btrfstest.Unmount(t, mnt)
		compareAll(t, []string{img}, "node ", "INODE_EXTREF", "(lzo)")
	})
	t.Run("raid1-kernel", func(t *testing.T) {
		devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{MetadataProfile: "raid1", DataProfile: "raid1"})
		mnt := btrfstest.Mount(t, "compress=zlib", devs...)
		btrfstest.PopulateFiles(t, mnt, 13)
		btrfstest.PopulateCompressed(t, mnt, 13)
		btrfstest.Unmount(t, mnt)
		compareAll(t, devs)
	})
	t.Run("rootdir-from-btrfs", func(t *testing.T) {
		src := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
		mnt := btrfstest.Mount(t, "", src)
		btrfstest.PopulateFixture(t, mnt, 14, false)
		btrfstest.PopulateXattrs(t, mnt, 14)
		btrfstest.PopulateLinks(t, mnt, 14)
		img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{RootDir: mnt})
		compareAll(t, []string{img})
	})
	t.Run("log-tree", func(t *testing.T) {
		compareAll(t, []string{logTreeImage(t)}, "log root tree", "TREE_LOG ROOT_ITEM", "DIR_LOG_INDEX", "ORPHAN_ITEM")
	})
	t.Run("space-cache-v1", func(t *testing.T) {
		img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 4 << 30, Extra: []string{"-R", "^free-space-tree"}})
		mnt := btrfstest.Mount(t, "space_cache=v1", img)
		btrfstest.PopulateFiles(t, mnt, 16)
		btrfstest.Unmount(t, mnt)
		compareAll(t, []string{img}, "FREE_SPACE UNTYPED", "cache generation")
	})
	t.Run("replace", func(t *testing.T) {
		img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
		mnt := btrfstest.Mount(t, "", img)
		btrfstest.PopulateFiles(t, mnt, 15)
		newImg := filepath.Join(t.TempDir(), "new.img")
		if err := os.WriteFile(newImg, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(newImg, btrfstest.DefaultImageSize); err != nil {
			t.Fatal(err)
		}
		target := btrfstest.Attach(t, newImg)
		btrfsCmd(t, "replace", "start", "-B", "1", target, mnt)
		btrfstest.Unmount(t, mnt)
		btrfstest.Detach(t, target)
		compareAll(t, []string{newImg}, "DEV_REPLACE")
	})
}

// logTreeImage returns a copy of an image taken while it was mounted, right
// after fsyncs: its superblock points to a log tree.
func logTreeImage(t *testing.T) string {
	t.Helper()
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	mnt := btrfstest.Mount(t, "commit=300", img)
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Orphan items: a deleted subvolume not yet cleaned up, and a file
	// unlinked while open, both committed before the copy is taken.
	btrfsCmd(t, "subvolume", "create", filepath.Join(mnt, "gone"))
	for i := range 500 {
		if err := os.WriteFile(filepath.Join(mnt, "gone", strconv.Itoa(i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	btrfsCmd(t, "filesystem", "sync", mnt)
	btrfsCmd(t, "subvolume", "delete", filepath.Join(mnt, "gone"))
	open, err := os.Create(filepath.Join(mnt, "d", "unlinked"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write(make([]byte, 10000)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(open.Name()); err != nil {
		t.Fatal(err)
	}
	btrfsCmd(t, "filesystem", "sync", mnt)
	for i := range 60 {
		f, err := os.Create(filepath.Join(mnt, "d", "f"+strings.Repeat("x", i%7)+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(strings.Repeat("data ", i*20+1))); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := os.Rename(filepath.Join(mnt, "d", "f0"), filepath.Join(mnt, "d", "renamed")); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(filepath.Join(mnt, "d"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	copyPath := filepath.Join(t.TempDir(), "log.img")
	copyFile(t, img, copyPath)
	open.Close()
	btrfstest.Unmount(t, mnt)
	return copyPath
}

// copyFile copies src to a new file dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}

// populateRefs builds what makes the extent tree interesting: an extent
// with more references than fit inline (keyed EXTENT_DATA_REFs), a kept
// snapshot whose source is then changed (shared and full backrefs),
// fragmented free space (bitmaps), a received subvolume (received uuid)
// and a large subvolume deleted just before unmounting (orphan item and
// drop progress, if the cleaner has not finished).
func populateRefs(t *testing.T, mnt string) {
	t.Helper()
	sv := filepath.Join(mnt, "sv")
	btrfsCmd(t, "subvolume", "create", sv)
	write := func(path string, n int, b byte) {
		t.Helper()
		if err := os.WriteFile(path, []byte(strings.Repeat(string(rune(b)), n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(sv, "base"), 256<<10, 'b')
	for i := range 150 {
		out, err := exec.Command("cp", "--reflink=always", filepath.Join(sv, "base"), filepath.Join(sv, "r"+strconv.Itoa(i))).CombinedOutput()
		if err != nil {
			t.Fatalf("cp --reflink: %v\n%s", err, out)
		}
	}
	for i := range 400 {
		write(filepath.Join(sv, "s"+strconv.Itoa(i)), 3000+i, byte('a'+i%26))
	}
	btrfsCmd(t, "filesystem", "sync", mnt)
	btrfsCmd(t, "subvolume", "snapshot", sv, filepath.Join(mnt, "snap"))
	for i := 0; i < 400; i += 7 {
		write(filepath.Join(sv, "s"+strconv.Itoa(i)), 5000, 'z')
	}
	for i := range 6000 {
		write(filepath.Join(mnt, "z"+strconv.Itoa(i)), 4096, 0)
	}
	btrfsCmd(t, "filesystem", "sync", mnt)
	for i := 0; i < 6000; i += 2 {
		if err := os.Remove(filepath.Join(mnt, "z"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	btrfsCmd(t, "subvolume", "snapshot", "-r", sv, filepath.Join(mnt, "ro"))
	if err := os.Mkdir(filepath.Join(mnt, "recv"), 0o755); err != nil {
		t.Fatal(err)
	}
	send := exec.Command("sh", "-c", "btrfs send -q \"$1\" | btrfs receive -q \"$2\"", "sh", filepath.Join(mnt, "ro"), filepath.Join(mnt, "recv"))
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("btrfs send | receive: %v\n%s", err, out)
	}
	big := filepath.Join(mnt, "big")
	btrfsCmd(t, "subvolume", "create", big)
	for i := range 3000 {
		write(filepath.Join(big, "f"+strconv.Itoa(i)), 100, 'q')
	}
	btrfsCmd(t, "filesystem", "sync", mnt)
	btrfsCmd(t, "subvolume", "delete", big)
}
