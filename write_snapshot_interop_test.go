//go:build linux

package btrfs_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestSnapshotInterop snapshots, with our writer, a subvolume of many
// files (a tree of several levels, so the snapshot shares blocks), a
// subvolume of one leaf, and the top level (into another subvolume),
// writable and read-only; then btrfs check (6.2, and 6.19 when present)
// is clean, the kernel shows each snapshot equal to its source as it was,
// `btrfs subvolume show` gives the snapshot's fields as the kernel sets
// them, the kernel writes into the sources and the writable snapshots
// (copying shared blocks as it does for its own snapshots), and check
// stays clean.
func TestSnapshotInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := formatTemp(t, 512<<20)
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = w.CreateSubvolume("big", nil)
	must(err)
	for i := range 600 {
		dir := fmt.Sprintf("big/d%02d", i%20)
		must(w.MkdirAll(dir, 0o755))
		data := []byte(strings.Repeat(fmt.Sprintf("file %d ", i), 1+i%700))
		must(w.WriteFile(fmt.Sprintf("%s/f%03d", dir, i), data, 0o644))
		must(w.Setxattr(fmt.Sprintf("%s/f%03d", dir, i), "user.i", []byte(fmt.Sprint(i))))
	}
	_, err = w.CreateSubvolume("small", nil)
	must(err)
	must(w.WriteFile("small/f", make([]byte, 100000), 0o644))
	must(w.WriteFile("small/inline", []byte("inline"), 0o644))
	must(w.WriteFile("top-file", []byte("top"), 0o600))
	_, err = w.CreateSubvolume("snaps", nil)
	must(err)

	// The first snapshot commits the uncommitted sources itself.
	bigSnap, err := w.Snapshot("big", "snaps/big-ro", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	_, err = w.Snapshot("big", "big-rw", nil)
	must(err)
	_, err = w.Snapshot("small", "small-rw", nil)
	must(err)
	_, err = w.Snapshot(".", "snaps/top", nil)
	must(err)

	// big is shared now, and its leaves name file data: our writer
	// copies the shared blocks it changes with the kernel's reference
	// rules (TestSnapshotCowInterop writes much more); a file made and
	// removed leaves big's contents equal to its snapshots'. small is
	// one leaf and stays writable.
	must(w.WriteFile("big/new", make([]byte, 20000), 0o644))
	must(w.Remove("big/new"))
	must(w.WriteFile("small/after", []byte("after the snapshot"), 0o644))
	// A snapshot into its own source is refused.
	if _, err := w.Snapshot("small", "small/inner", nil); !errors.Is(err, btrfs.ErrUnsupported) {
		t.Errorf("snapshot inside its source: %v, want ErrUnsupported", err)
	}
	if _, err := w.Snapshot("top-file", "x", nil); err == nil {
		t.Errorf("snapshot of a file: no error")
	}
	if _, err := w.Snapshot("snaps/big-ro", "snaps/big-ro", nil); err == nil {
		t.Errorf("snapshot onto an existing name: no error")
	}
	must(w.Close())

	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)

	// The kernel's view: each snapshot equals its source (small as it
	// was before "after"), the top snapshot holds the top's files and
	// empty directories where the top has subvolumes.
	dir := btrfstest.Mount(t, "", img)
	scanOf := func(p string) *btrfstest.Tree {
		t.Helper()
		tr, err := btrfstest.Scan(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	for _, pair := range [][2]string{{"big", "snaps/big-ro"}, {"big", "big-rw"}} {
		if d := btrfstest.Diff(scanOf(pair[0]), scanOf(pair[1]), btrfstest.DiffOptions{IgnoreDirMtime: true}); len(d) > 0 {
			t.Errorf("%s differs from %s: %q", pair[1], pair[0], d)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "small-rw/after")); !os.IsNotExist(err) {
		t.Errorf("small-rw/after: %v, want no such file (made after the snapshot)", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "small-rw/inline")); err != nil || string(b) != "inline" {
		t.Errorf("small-rw/inline: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "snaps/top/top-file")); err != nil || string(b) != "top" {
		t.Errorf("snaps/top/top-file: %q, %v", b, err)
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "snaps/top/big")); err != nil || len(ents) != 0 {
		t.Errorf("snaps/top/big (a subvolume of the source): %v, %v; want an empty directory", ents, err)
	}
	out, err := exec.Command("btrfs", "subvolume", "show", filepath.Join(dir, "snaps/big-ro")).CombinedOutput()
	if err != nil {
		t.Fatalf("subvolume show: %v\n%s", err, out)
	}
	show := strings.Join(strings.Fields(string(out)), " ")
	srcOut, err := exec.Command("btrfs", "subvolume", "show", filepath.Join(dir, "big")).CombinedOutput()
	if err != nil {
		t.Fatalf("subvolume show: %v\n%s", err, srcOut)
	}
	srcUUID := field(string(srcOut), "UUID:")
	for _, want := range []string{"Parent UUID: " + srcUUID, "Flags: readonly", fmt.Sprintf("Subvolume ID: %d", bigSnap)} {
		if !strings.Contains(show, want) {
			t.Errorf("btrfs subvolume show of the snapshot lacks %q:\n%s", want, show)
		}
	}
	if !strings.Contains(string(srcOut), "snaps/big-ro") {
		t.Errorf("btrfs subvolume show of the source does not list the snapshot:\n%s", srcOut)
	}
	// The kernel writes into shared trees: the source, the writable
	// snapshot; the read-only one refuses.
	for _, p := range []string{"big/d03/f003", "big-rw/d04/f004", "snaps/top/top-file"} {
		must(os.WriteFile(filepath.Join(dir, p), []byte("kernel was here"), 0o644))
	}
	must(os.RemoveAll(filepath.Join(dir, "big-rw/d05")))
	if err := os.WriteFile(filepath.Join(dir, "snaps/big-ro/x"), nil, 0o644); err == nil {
		t.Errorf("the kernel wrote into the read-only snapshot")
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
}

// field returns the value after label on the line that starts with it
// (after tabs), as btrfs subvolume show prints it.
func field(out, label string) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, label) {
			return strings.TrimSpace(strings.TrimPrefix(l, label))
		}
	}
	return ""
}

// TestSnapshotSendReceive makes two read-only snapshots with our writer
// of a subvolume changed between them (a one-leaf subvolume: our writer
// does not yet write into shared trees of more levels), and has the
// kernel send the first in full and the second as a delta against the
// first (`btrfs send -p`, which follows parent_uuid and ctransid) into a
// fresh kernel filesystem: the received second snapshot equals ours.
func TestSnapshotSendReceive(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := formatTemp(t, 256<<20)
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = w.CreateSubvolume("sv", nil)
	must(err)
	for i := range 12 {
		must(w.WriteFile(fmt.Sprintf("sv/f%d", i), []byte(strings.Repeat(fmt.Sprint(i), 50+i)), 0o644))
	}
	must(w.WriteFile("sv/big", make([]byte, 300000), 0o644))
	_, err = w.Snapshot("sv", "s1", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	must(w.WriteFile("sv/f3", []byte("changed"), 0o600))
	must(w.Remove("sv/f5"))
	must(w.WriteFile("sv/added", []byte("added after s1"), 0o644))
	must(w.Rename("sv/f7", "sv/f7-renamed"))
	_, err = w.WriteAt("sv/big", []byte("overwritten in the middle"), 150000)
	must(err)
	_, err = w.Snapshot("sv", "s2", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	must(w.Close())
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)

	ours := btrfstest.Mount(t, "ro", img)
	theirs := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	sendReceive(t, theirs, filepath.Join(ours, "s1"))
	sendReceive(t, theirs, "-p", filepath.Join(ours, "s1"), filepath.Join(ours, "s2"))
	want, err := btrfstest.Scan(filepath.Join(ours, "s2"))
	must(err)
	got, err := btrfstest.Scan(filepath.Join(theirs, "s2"))
	must(err)
	if d := btrfstest.Diff(want, got, btrfstest.DiffOptions{IgnoreDirMtime: true}); len(d) > 0 {
		t.Errorf("s2 received from an incremental send differs from ours: %q", d)
	}
}

// sendReceive pipes `btrfs send` with args (the kernel's send of a
// read-only subvolume, in full or with -p against a parent) into
// `btrfs receive` into dir.
func sendReceive(t *testing.T, dir string, args ...string) {
	t.Helper()
	send := exec.Command("btrfs", append([]string{"send", "-q"}, args...)...)
	recv := exec.Command("btrfs", "receive", "-q", dir)
	pipe, err := send.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	recv.Stdin = pipe
	var serr, rerr strings.Builder
	send.Stderr, recv.Stderr = &serr, &rerr
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	if err := recv.Run(); err != nil {
		send.Wait()
		t.Fatalf("btrfs receive: %v\n%s\nsend: %s", err, rerr.String(), serr.String())
	}
	if err := send.Wait(); err != nil {
		t.Fatalf("btrfs send %v: %v\n%s", args, err, serr.String())
	}
}
