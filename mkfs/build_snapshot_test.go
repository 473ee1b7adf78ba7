package mkfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestBuildSnapshots builds a snapper layout in one go (@ the default,
// @home, @/.snapshots a subvolume inside @, a read-only snapshot of @ at
// @/.snapshots/1/snapshot) plus a writable snapshot of the top level,
// reproducibly: our read side and the kernel see each snapshot equal to
// its source (nested subvolumes as empty directories), btrfs check
// passes, the same input gives the same bytes, and a snapshot that
// cannot be made fails the build.
func TestBuildSnapshots(t *testing.T) {
	src := t.TempDir()
	for i := range 300 {
		p := filepath.Join(src, fmt.Sprintf("@/usr/share/d%02d/f%03d", i%30, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 100+i*40), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"@home/user", "@/.snapshots/1", "snaps"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := BuildOptions{
		Subvols: []Subvolume{{Path: "@", Default: true}, {Path: "@home"}, {Path: "@/.snapshots"}, {Path: "snaps"}},
		Snapshots: []Snapshot{
			{Source: "@", Dest: "@/.snapshots/1/snapshot", ReadOnly: true},
			{Source: ".", Dest: "snaps/top"},
		},
		Reproducible: true,
	}
	opts.Format.Seed = []byte("seed")
	img := buildImage(t, dirOpener(src), opts)
	again := buildImage(t, dirOpener(src), opts)
	a, _ := os.ReadFile(img)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Errorf("two reproducible builds with snapshots differ")
	}

	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	svs, err := fsys.Subvolumes()
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]btrfs.SubvolumeInfo{}
	for _, sv := range svs {
		byPath[sv.Path] = sv
	}
	snap, at := byPath["@/.snapshots/1/snapshot"], byPath["@"]
	if !snap.ReadOnly || snap.ParentUUID != at.UUID || snap.CTransID != at.CTransID {
		t.Errorf("snapshot %+v of @ %+v: want read-only, parent_uuid @'s uuid, @'s ctransid", snap, at)
	}
	want, _ := os.ReadFile(filepath.Join(src, "@/usr/share/d07/f187"))
	if got, err := fsys.ReadFile("@/.snapshots/1/snapshot/usr/share/d07/f187"); err != nil || !bytes.Equal(got, want) {
		t.Errorf("snapshot's file: %d bytes, %v", len(got), err)
	}
	// Subvolumes inside the source are empty directories in the
	// snapshot, as the kernel shows them (their ROOT_REF names the
	// source's directory, not the snapshot's).
	for _, p := range []string{"snaps/top/@home", "@/.snapshots/1/snapshot/.snapshots"} {
		if ents, err := fsys.ReadDir(p); err != nil || len(ents) != 0 {
			t.Errorf("our read side: %s holds %d entries, %v; want an empty directory", p, len(ents), err)
		}
	}
	fsys.Close()

	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	if !btrfstest.Interop() && os.Getenv(btrfstest.InteropEnv) != "1" {
		return
	}
	mnt := btrfstest.Mount(t, "ro,subvolid=5", img)
	scan := func(p string) *btrfstest.Tree {
		t.Helper()
		tr, err := btrfstest.Scan(filepath.Join(mnt, p))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	// The snapshot holds @ with .snapshots (a subvolume) as an empty
	// directory: compare the rest.
	o := btrfstest.DiffOptions{IgnoreDirMtime: true, Filter: func(p string) bool {
		return p != ".snapshots" && !filepathHasPrefix(p, ".snapshots/")
	}}
	if d := btrfstest.Diff(scan("@"), scan("@/.snapshots/1/snapshot"), o); len(d) > 0 {
		t.Errorf("the kernel's @ and its snapshot differ: %q", d)
	}
	if ents, err := os.ReadDir(filepath.Join(mnt, "@/.snapshots/1/snapshot/.snapshots")); err != nil || len(ents) != 0 {
		t.Errorf("the snapshot's .snapshots: %v, %v; want an empty directory", ents, err)
	}
	if ents, err := os.ReadDir(filepath.Join(mnt, "snaps/top/@home")); err != nil || len(ents) != 0 {
		t.Errorf("snaps/top/@home: %v, %v; want an empty directory", ents, err)
	}
	btrfstest.Unmount(t, mnt)

	bad := opts
	bad.Snapshots = []Snapshot{{Source: "@home/user", Dest: "x"}}
	if _, err := Build(filepath.Join(t.TempDir(), "img"), dirOpener(src), bad); err == nil {
		t.Errorf("a snapshot of a plain directory built")
	}
}

func filepathHasPrefix(p, prefix string) bool {
	return len(p) >= len(prefix) && p[:len(prefix)] == prefix
}
