package btrfs_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestCreateSubvolumeInterop makes subvolumes, reads them back inside the
// transaction, and checks the result with btrfs check, btrfs subvolume
// list/show and the kernel, which then writes into them.
func TestCreateSubvolumeInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	uuid := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	when := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	id, err := fsys.CreateSubvolume("d/sv", &btrfs.SubvolumeOptions{UUID: uuid, Time: when})
	if err != nil {
		t.Fatal(err)
	}
	id2, err := fsys.CreateSubvolume("top", nil)
	if err != nil {
		t.Fatal(err)
	}
	if id != 256 || id2 != 257 {
		t.Errorf("ids %d %d, want 256 257", id, id2)
	}
	if _, err := fsys.CreateSubvolume("top", nil); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("second top: %v, want EEXIST", err)
	}
	// Changes inside the new subvolumes, in the same transaction.
	for _, step := range []error{
		fsys.Mkdir("d/sv/x", 0o700),
		fsys.CreateEmpty("d/sv/x/f", 0o600),
		fsys.Setxattr("d/sv/x/f", "user.where", []byte("sv")),
		fsys.Symlink("x/f", "d/sv/link"),
		fsys.Link("d/sv/x/f", "d/sv/hard"),
		fsys.Rename("d/sv/hard", "d/sv/x/hard2"),
		fsys.WriteFile("d/sv/data", []byte("data in a subvolume"), 0o644),
		fsys.Chmod("d/sv", 0o750),
		fsys.MkdirAll("top/a/b", 0o755),
		fsys.CreateEmpty("top/a/b/c", 0o644),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	for what, err := range map[string]error{
		"link across":   fsys.Link("d/sv/x/f", "top/f"),
		"rename across": fsys.Rename("d/sv/x", "top/x"),
		"rename out":    fsys.Rename("top/a", "a"),
	} {
		if !errors.Is(err, syscall.EXDEV) {
			t.Errorf("%s: %v, want EXDEV", what, err)
		}
	}
	// Visible before the commit.
	if b, err := fsys.ReadFile("d/sv/data"); err != nil || string(b) != "data in a subvolume" {
		t.Errorf("d/sv/data in the transaction: %q %v", b, err)
	}
	fi, err := fsys.Stat("d/sv")
	if err != nil || !fi.IsDir() {
		t.Fatalf("stat d/sv in the transaction: %v %v", fi, err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	subs, err := fsys.Subvolumes()
	if err != nil || len(subs) != 2 {
		t.Fatalf("Subvolumes after commit: %v %v", subs, err)
	}
	fsys.Close()
	btrfstest.Check(t, []string{img}, false)

	dir := btrfstest.Mount(t, "", img)
	out, err := exec.Command("btrfs", "subvolume", "list", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "path d/sv") || !strings.Contains(string(out), "path top") {
		t.Errorf("subvolume list: %v\n%s", err, out)
	}
	out, err = exec.Command("btrfs", "subvolume", "show", filepath.Join(dir, "d/sv")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "01020304-0506-0708-090a-0b0c0d0e0f10") {
		t.Errorf("subvolume show: %v\n%s", err, out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "d/sv"), &st); err != nil || st.Ino != 256 {
		t.Errorf("d/sv inode %d: %v", st.Ino, err)
	}
	for path, want := range map[string]string{"d/sv/data": "data in a subvolume", "d/sv/link": "", "top/a/b/c": ""} {
		if b, err := os.ReadFile(filepath.Join(dir, path)); err != nil || string(b) != want {
			t.Errorf("kernel reads %s: %q %v", path, b, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "d/sv")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("d/sv mode: %v %v", fi, err)
	}
	var st2 syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "d/sv/x/hard2"), &st2); err != nil || st2.Nlink != 2 {
		t.Errorf("d/sv/x/hard2 nlink %d: %v", st2.Nlink, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d/sv/kernel.txt"), []byte("in the subvolume"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "top/kdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, false)

	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if b, err := ro.ReadFile("d/sv/kernel.txt"); err != nil || string(b) != "in the subvolume" {
		t.Errorf("kernel's file in our subvolume: %q %v", b, err)
	}
	ro.Close()

	// A second session changes the subvolume the kernel wrote to.
	fsys, err = btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove("d/sv/kernel.txt"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.RemoveAll("d/sv/x"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	fsys.Close()
	btrfstest.Check(t, []string{img}, true)
	dir = btrfstest.Mount(t, "ro", img)
	ents, err := os.ReadDir(filepath.Join(dir, "d/sv"))
	if err != nil || len(ents) != 2 {
		t.Errorf("d/sv after the second session: %v %v", ents, err)
	}
}
