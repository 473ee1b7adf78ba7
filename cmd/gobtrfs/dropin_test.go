package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestMain lets the test binary be gobtrfs itself: started through a
// symlink named mkfs.btrfs, it runs main, which is what an image
// builder's PATH reaches.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "mkfs.btrfs" {
		main()
		return
	}
	os.Exit(m.Run())
}

// mkfsBtrfs returns the path of a mkfs.btrfs symlink to this binary.
func mkfsBtrfs(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "mkfs.btrfs")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// rootfs writes a small root filesystem tree: directories that become
// subvolumes, text, a compressible and an incompressible file, a
// symlink and a hardlink.
func rootfs(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	noise := make([]byte, 300<<10)
	rand.Read(noise)
	files := map[string][]byte{
		"etc/hostname":                   []byte("builder\n"),
		"etc/os-release":                 []byte("ID=test\n"),
		"usr/lib/libx.so":                bytes.Repeat([]byte("compressible library text "), 20000),
		"usr/share/noise":                noise,
		"home/user/.profile":             []byte("export A=1\n"),
		"var/lib/machines/disk.raw":      bytes.Repeat([]byte{0}, 64<<10),
		"nix/store/abc-hello/bin/hello":  []byte("#!/bin/sh\necho hello\n"),
		"nix/store/abc-hello/share/READ": []byte("readme"),
	}
	for p, data := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../usr/lib/libx.so", filepath.Join(dir, "etc/libx")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "etc/hostname"), filepath.Join(dir, "etc/hostname.link")); err != nil {
		t.Fatal(err)
	}
	// Times in the past, so SOURCE_DATE_EPOCH below clamps nothing it
	// should not.
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
		os.Lchown(p, 0, 0)
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			os.Chtimes(p, old, old)
		}
		return nil
	})
	if out, err := exec.Command("touch", "-h", "-d", old.Format(time.RFC3339), filepath.Join(dir, "etc/libx")).CombinedOutput(); err != nil {
		t.Fatalf("touch -h: %v\n%s", err, out)
	}
	return dir
}

// builderCase is one image builder's mkfs.btrfs command line.
type builderCase struct {
	name string
	// args, with ROOT for the input directory and IMG for the image.
	args []string
	env  []string
	// precreate makes the image file first, of this size (-1: none, 0:
	// an empty file, as NixOS's touch).
	precreate int64
	label     string
	uuid      string
	subvols   []string // expected subvolume paths
	shrunk    bool     // the image must end smaller than precreated
}

// builderUUID is the -U of the builder lines that pass one.
const builderUUID = "5a1d0b3e-7c2f-4e11-9d3a-0123456789ab"

// builderCases are the mkfs.btrfs command lines of the image builders
// (systemd-repart, Yocto, genimage, NixOS, wic), for the test and the
// benchmark against mkfs.btrfs.
func builderCases() []builderCase {
	const uuid = builderUUID
	return []builderCase{
		{name: "systemd-repart", precreate: 256 << 20, label: "root", uuid: uuid,
			args: []string{"-L", "root", "-U", uuid, "--nodiscard", "-r", "ROOT", "--subvol", "home",
				"--subvol", "ro:usr", "--inode-flags", "nodatacow:var/lib/machines", "--compress", "zstd:3", "IMG"},
			subvols: []string{"home", "usr"}},
		{name: "yocto", precreate: 256 << 20, shrunk: true,
			args: []string{"-n", "4096", "--shrink", "-r", "ROOT", "IMG"}},
		{name: "genimage", precreate: 200 << 20, label: "rootfs",
			args: []string{"-L", "rootfs", "-r", "ROOT", "IMG"}},
		{name: "nixos", precreate: 0, label: "nixos", uuid: uuid, env: []string{"SOURCE_DATE_EPOCH=1700000000"},
			args:    []string{"-L", "nixos", "-U", uuid, "--subvol", "nix", "-r", "ROOT", "--shrink", "IMG"},
			subvols: []string{"nix"}},
		{name: "wic", precreate: 300 << 20, uuid: uuid,
			args: []string{"-b", "300M", "-r", "ROOT", "-U", uuid, "IMG"}},
	}
}

// TestMkfsBtrfsBuilders runs the command lines image builders use,
// through a mkfs.btrfs symlink to gobtrfs: each image passes btrfs check
// with data checksums, and the kernel mounts it and shows the input
// (with the label, UUID and subvolumes asked for).
func TestMkfsBtrfsBuilders(t *testing.T) {
	btrfstest.RequireInterop(t)
	bin := mkfsBtrfs(t)
	src := rootfs(t)
	for _, tc := range builderCases() {
		t.Run(tc.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), tc.name+".img")
			if tc.precreate >= 0 {
				if err := os.WriteFile(img, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(img, tc.precreate); err != nil {
					t.Fatal(err)
				}
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.NewReplacer("ROOT", src, "IMG", img).Replace(a)
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), tc.env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("mkfs.btrfs %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			checkBuilderImage(t, tc, img, src)
		})
	}
}

// checkBuilderImage checks one builder's image: label, UUID, subvolumes,
// shrinking, btrfs check, and the kernel's view of the contents.
func checkBuilderImage(t *testing.T, tc builderCase, img, src string) {
	t.Helper()
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	svs, err := fsys.Subvolumes()
	fsys.Close()
	if err != nil {
		t.Fatal(err)
	}
	if info.Label != tc.label {
		t.Errorf("label %q, want %q", info.Label, tc.label)
	}
	if tc.uuid != "" && info.UUID != tc.uuid {
		t.Errorf("UUID %s, want %s", info.UUID, tc.uuid)
	}
	var paths []string
	for _, sv := range svs {
		paths = append(paths, sv.Path)
	}
	if strings.Join(paths, " ") != strings.Join(tc.subvols, " ") {
		t.Errorf("subvolumes %q, want %q", paths, tc.subvols)
	}
	if fi, err := os.Stat(img); err == nil && tc.shrunk && fi.Size() >= tc.precreate && tc.precreate > 0 {
		t.Errorf("--shrink left %d bytes of %d", fi.Size(), tc.precreate)
	}
	btrfstest.Check(t, []string{img}, true)
	// A newer btrfs check (6.19's is stricter than Debian's 6.2) where
	// GOBTRFS_PROGS_DIR names a directory holding one.
	if d := os.Getenv("GOBTRFS_PROGS_DIR"); d != "" {
		out, err := exec.Command(filepath.Join(d, "btrfs"), "check", "--readonly", "--check-data-csum", img).CombinedOutput()
		if err != nil {
			t.Errorf("%s/btrfs check: %v\n%s", d, err, out)
		}
	}
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	mnt := btrfstest.Mount(t, "ro,subvolid=5", img)
	got, err := btrfstest.Scan(mnt)
	if err != nil {
		t.Fatal(err)
	}
	opts := btrfstest.DiffOptions{CompareNlink: true, IgnoreXattr: func(n string) bool { return strings.HasPrefix(n, "btrfs.") }}
	if d := btrfstest.Diff(want, got, opts); len(d) > 0 {
		t.Errorf("the kernel shows something else than the input:\n%s", strings.Join(d, "\n"))
	}
	out, err := exec.Command("btrfs", "filesystem", "label", mnt).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != tc.label {
		t.Errorf("kernel's label %q (%v), want %q", out, err, tc.label)
	}
	if tc.uuid != "" {
		out, err := exec.Command("btrfs", "filesystem", "show", mnt).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.uuid) {
			t.Errorf("filesystem show: %s (%v), want uuid %s", out, err, tc.uuid)
		}
	}
	if len(tc.subvols) > 0 {
		out, err := exec.Command("btrfs", "subvolume", "list", mnt).CombinedOutput()
		for _, p := range tc.subvols {
			if err != nil || !strings.Contains(string(out), "path "+p+"\n") {
				t.Errorf("subvolume list: %s (%v), want %s", out, err, p)
			}
		}
	}
}

// TestMkfsBtrfsReproducible builds images twice under the names
// btrfs-progs' reproducible-image work uses (SOURCE_DATE_EPOCH,
// DETERMINISTIC_SEED=1 with -U) and compares the bytes: equal input and
// flags give equal images, another -U another image, and
// SOURCE_DATE_EPOCH clamps times newer than it and keeps older ones.
func TestMkfsBtrfsReproducible(t *testing.T) {
	bin := mkfsBtrfs(t)
	src := rootfs(t)
	fresh := filepath.Join(src, "etc/fresh")
	if err := os.WriteFile(fresh, []byte("made now"), 0o644); err != nil {
		t.Fatal(err)
	}
	const epoch = 1700000000
	build := func(env []string, args ...string) ([]byte, string) {
		t.Helper()
		img := filepath.Join(t.TempDir(), "img")
		cmd := exec.Command(bin, append(append([]string{"-q"}, args...), "-r", src, "--shrink", img)...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mkfs.btrfs %q %q: %v\n%s", env, args, err, out)
		}
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		return b, img
	}
	sde := []string{"SOURCE_DATE_EPOCH=1700000000"}
	const u1, u2 = "11111111-2222-4333-8444-555555555555", "11111111-2222-4333-8444-555555555556"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"epoch", sde, nil},
		{"epoch and uuid", sde, []string{"-U", u1, "--subvol", "ro:usr"}},
		{"deterministic seed", []string{"DETERMINISTIC_SEED=1"}, []string{"-U", u1}},
	} {
		a, img := build(tc.env, tc.args...)
		b, _ := build(tc.env, tc.args...)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two builds differ (%d and %d bytes)", tc.name, len(a), len(b))
		}
		if tc.name == "epoch" {
			btrfstest.Check(t, []string{img}, true)
			checkClamped(t, img, epoch)
		}
	}
	a, _ := build(sde, "-U", u1)
	b, _ := build(sde, "-U", u2)
	if bytes.Equal(a, b) {
		t.Errorf("different -U gave the same image")
	}
	cmd := exec.Command(bin, "-r", src, filepath.Join(t.TempDir(), "img"))
	cmd.Env = append(os.Environ(), "DETERMINISTIC_SEED=1")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "-U") {
		t.Errorf("DETERMINISTIC_SEED=1 without -U: %v, %s; want an error asking for -U", err, out)
	}
}

// checkClamped checks that SOURCE_DATE_EPOCH clamped a file made now and
// kept the older times of the others.
func checkClamped(t *testing.T, img string, epoch int64) {
	t.Helper()
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for p, want := range map[string]int64{
		"etc/fresh": epoch, "etc/hostname": time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).Unix(),
	} {
		fi, err := fsys.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.ModTime().Unix(); got != want {
			t.Errorf("%s: mtime %d, want %d", p, got, want)
		}
	}
}
