//go:build linux

package btrfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// The kinds of filesystem of issue 12 point 7 (docs/design/0021): what
// mkfs.btrfs and the kernel make, changed by us, then btrfs check and the
// kernel's view.

// dataProfiles returns the start and profile of every DATA block group.
func dataProfiles(t *testing.T, fsys *btrfs.FS) map[uint64]string {
	t.Helper()
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]string{}
	for _, g := range info.BlockGroups {
		if g.Type == "DATA" {
			out[g.Start] = g.Profile
		}
	}
	return out
}

// TestKindsProfilesWrite changes RAID1C3, RAID1C4, RAID5 and RAID6
// filesystems made by mkfs.btrfs with every device present: files written
// until a new DATA chunk of the filesystem's profile is made, a rename and
// a removal; then btrfs check with data checksums is clean, the kernel
// reads our files, writes one of its own, check stays clean, and we read
// the kernel's file.
func TestKindsProfilesWrite(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, c := range []struct {
		profile string
		devs    int
	}{{"raid1c3", 3}, {"raid1c4", 4}, {"raid5", 3}, {"raid6", 4}} {
		t.Run(c.profile, func(t *testing.T) {
			// Small devices: small chunks, so a few MiB make a new one.
			devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{Size: 128 << 20, NumDevices: c.devs, DataProfile: c.profile, MetadataProfile: c.profile})
			fsys, err := btrfs.OpenWritable(devs[0], &btrfs.Options{Devices: devs[1:]})
			if err != nil {
				t.Fatal(err)
			}
			before := dataProfiles(t, fsys)
			src := rand.NewChaCha8([32]byte{21})
			r := rand.New(src)
			files := map[string][]byte{}
			if err := fsys.Mkdir("kinds", 0o755); err != nil {
				t.Fatal(err)
			}
			newGroup := func() bool { return len(dataProfiles(t, fsys)) > len(before) }
			for i := 0; !newGroup(); i++ {
				if i == 75 {
					t.Fatalf("no new DATA chunk after %d MiB", 2*i)
				}
				data := make([]byte, 2<<20+r.IntN(5000))
				src.Read(data)
				name := fmt.Sprintf("kinds/f%d", i)
				if err := fsys.WriteFile(name, data, 0o644); err != nil {
					t.Fatal(err)
				}
				files[name] = data
				if i%4 == 3 {
					if err := fsys.Commit(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for start, p := range dataProfiles(t, fsys) {
				if _, old := before[start]; !old && p != c.profile {
					t.Fatalf("new DATA group %d has profile %s, want %s", start, p, c.profile)
				}
			}
			if err := fsys.Rename("kinds/f0", "kinds/renamed"); err != nil {
				t.Fatal(err)
			}
			files["kinds/renamed"] = files["kinds/f0"]
			delete(files, "kinds/f0")
			if err := fsys.Remove("kinds/f1"); err != nil {
				t.Fatal(err)
			}
			delete(files, "kinds/f1")
			if err := fsys.WriteFile("kinds/small", []byte("small\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			files["kinds/small"] = []byte("small\n")
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			btrfstest.Check(t, devs, true)
			kernelSeesAndWrites(t, devs, files)
			btrfstest.Check(t, devs, true)
			fsys, err = btrfs.Open(devs[0], &btrfs.Options{Devices: devs[1:]})
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			got, err := fsys.ReadFile("kernel-file")
			if err != nil || string(got) != "from the kernel\n" {
				t.Fatalf("kernel's file: %q, %v", got, err)
			}
		})
	}
}

// kernelSeesAndWrites mounts devs, compares files with what the kernel
// reads, and lets the kernel write "kernel-file".
func kernelSeesAndWrites(t *testing.T, devs []string, files map[string][]byte) {
	t.Helper()
	dir := btrfstest.Mount(t, "", devs...)
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("kernel reads %s: %d bytes, want %d (or contents differ)", name, len(got), len(want))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel-file"), []byte("from the kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
}

// qgroupStatus returns the qgroup status line of dump-tree for img.
func qgroupStatus(t *testing.T, img string) string {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "quota", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -t quota: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "flags ") && strings.Contains(l, "scan ") {
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("no qgroup status in\n%s", out)
	return ""
}

// TestKindsQuotaWrite changes a filesystem with quotas the kernel enabled
// and counted: our first commit marks the qgroup counts inconsistent, as
// the kernel does when it cannot keep them in step; btrfs check is clean,
// the kernel mounts it and shows our change, a rescan by the kernel makes
// the counts consistent again, and check stays clean.
func TestKindsQuotaWrite(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	dir := btrfstest.Mount(t, "", img)
	if out, err := exec.Command("btrfs", "quota", "enable", dir).CombinedOutput(); err != nil {
		t.Fatalf("btrfs quota enable: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "before"), bytes.Repeat([]byte("q"), 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("btrfs", "subvolume", "create", filepath.Join(dir, "sv")).CombinedOutput(); err != nil {
		t.Fatalf("subvolume create: %v\n%s", err, out)
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, true)
	if st := qgroupStatus(t, img); strings.Contains(st, "INCONSISTENT") {
		t.Fatalf("kernel left %q", st)
	}

	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := fsys.WriteFile("ours", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile("sv/ours", data[:5000], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove("before"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if st := qgroupStatus(t, img); !strings.Contains(st, "INCONSISTENT") || !strings.Contains(st, "ON") {
		t.Fatalf("qgroup status after our change: %q, want ON|INCONSISTENT", st)
	}
	btrfstest.Check(t, []string{img}, true)

	dir = btrfstest.Mount(t, "", img)
	if got, err := os.ReadFile(filepath.Join(dir, "ours")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("kernel reads ours: %d bytes, %v", len(got), err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "sv/ours")); err != nil || !bytes.Equal(got, data[:5000]) {
		t.Fatalf("kernel reads sv/ours: %d bytes, %v", len(got), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "before")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed file: %v", err)
	}
	if out, err := exec.Command("btrfs", "quota", "rescan", "-w", dir).CombinedOutput(); err != nil {
		t.Fatalf("btrfs quota rescan -w: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel-file"), []byte("from the kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
	if st := qgroupStatus(t, img); strings.Contains(st, "INCONSISTENT") {
		t.Fatalf("qgroup status after the kernel's rescan: %q", st)
	}
	btrfstest.Check(t, []string{img}, true)
}

// TestKindsSeedingRefused: a seeding device (btrfstune -S 1) is refused
// for writing up front, with ErrUnsupported and a message naming the
// feature and what to do, leaving the image's bytes as they were; it
// still opens read-only. So is a filesystem the kernel sprouted from it.
func TestKindsSeedingRefused(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	dir := btrfstest.Mount(t, "", img)
	if err := os.WriteFile(filepath.Join(dir, "seeded"), []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
	if out, err := exec.Command("btrfstune", "-S", "1", img).CombinedOutput(); err != nil {
		t.Fatalf("btrfstune -S 1: %v\n%s", err, out)
	}
	sum := sparseSum(t, img)
	_, err := btrfs.OpenWritable(img, nil)
	if !errors.Is(err, btrfs.ErrUnsupported) || !strings.Contains(err.Error(), "seeding device") ||
		!strings.Contains(err.Error(), "btrfs device add") || !strings.Contains(err.Error(), "btrfstune -S 0") {
		t.Fatalf("OpenWritable of a seeding device: %v", err)
	}
	if sparseSum(t, img) != sum {
		t.Fatal("refused open changed the image")
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if got, err := fsys.ReadFile("seeded"); err != nil || string(got) != "seed\n" {
		t.Fatalf("read seeded: %q, %v", got, err)
	}
	fsys.Close()

	// Sprouted by the kernel: the new device's filesystem lists the seed's
	// device in its chunk tree.
	sprout := filepath.Join(t.TempDir(), "sprout.img")
	if err := os.WriteFile(sprout, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sprout, 256<<20); err != nil {
		t.Fatal(err)
	}
	dir = btrfstest.Mount(t, "ro", img)
	loop := btrfstest.Attach(t, sprout)
	if out, err := exec.Command("btrfs", "device", "add", "-f", loop, dir).CombinedOutput(); err != nil {
		t.Fatalf("btrfs device add: %v\n%s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "remount,rw", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount rw: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "sprouted"), []byte("sprout\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Detach(t, loop)
	sum = sparseSum(t, sprout)
	_, err = btrfs.OpenWritable(sprout, nil)
	if !errors.Is(err, btrfs.ErrUnsupported) || !strings.Contains(err.Error(), "sprouted from a seeding device") {
		t.Fatalf("OpenWritable of a sprouted filesystem: %v", err)
	}
	if sparseSum(t, sprout) != sum {
		t.Fatal("refused open changed the sprout")
	}
}

// TestKindsSimpleQuotaRefused: a filesystem with simple quotas (made by
// the mkfs.btrfs of GOBTRFS_PROGS_DIR; 6.2 cannot) is refused for
// writing up front, naming the feature, its bytes unchanged.
func TestKindsSimpleQuotaRefused(t *testing.T) {
	dir := btrfstest.ProgsDir()
	if dir == "" {
		t.Skipf("%s not set: no mkfs.btrfs that makes simple quotas", btrfstest.ProgsDirEnv)
	}
	img := filepath.Join(t.TempDir(), "squota.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 256<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(dir, "mkfs.btrfs"), "-q", "-O", "squota", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.btrfs -O squota: %v\n%s", err, out)
	}
	sum := sparseSum(t, img)
	_, err := btrfs.OpenWritable(img, nil)
	if !errors.Is(err, btrfs.ErrUnsupported) || !strings.Contains(err.Error(), "simple quotas") ||
		!strings.Contains(err.Error(), "btrfs quota disable") {
		t.Fatalf("OpenWritable with simple quotas: %v", err)
	}
	if sparseSum(t, img) != sum {
		t.Fatal("refused open changed the image")
	}
}
