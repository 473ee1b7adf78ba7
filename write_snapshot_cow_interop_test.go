//go:build linux

package btrfs_test

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// snapModel is what one subvolume must hold: every file's content by its
// path, "/" for a directory.
type snapModel map[string]string

// TestSnapshotCowInterop writes with our writer into subvolumes whose
// trees share blocks with snapshots (issue 14 item 1, slices b and c): a
// source of three levels whose leaves name no file data (small files are
// inline) and its writable snapshot take creates, data writes (inline and
// in extents), renames and removes; so do a source whose leaves name file
// data (its copies of shared leaves give their data extents references
// by the old leaf's address, SHARED_DATA_REF) and its writable snapshot.
// After each commit btrfs check (6.2 and our checker, and 6.19 when
// GOBTRFS_PROGS_DIR is set, all with data checksums) is clean and the
// kernel shows every subvolume, read-only snapshots included, equal to
// its model.
func TestSnapshotCowInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	// 4 KiB nodes, so a few thousand small files make a tree of three
	// levels: copies of shared nodes below the root (rule 2 turns their
	// children's references into references by parent) need one.
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	open := func() *btrfs.FS {
		t.Helper()
		w, err := btrfs.OpenWritable(img, nil)
		must(err)
		return w
	}
	models := map[string]snapModel{"src": {}, "data": {}, "data2": {}}
	write := func(w *btrfs.FS, sv, name, content string) {
		t.Helper()
		must(w.WriteFile(sv+"/"+name, []byte(content), 0o644))
		models[sv][name] = content
	}
	mkdir := func(w *btrfs.FS, sv, name string) {
		t.Helper()
		must(w.Mkdir(sv+"/"+name, 0o755))
		models[sv][name] = "/"
	}
	remove := func(w *btrfs.FS, sv, name string) {
		t.Helper()
		must(w.Remove(sv + "/" + name))
		delete(models[sv], name)
	}
	rename := func(w *btrfs.FS, sv, from, to string) {
		t.Helper()
		must(w.Rename(sv+"/"+from, sv+"/"+to))
		models[sv][to] = models[sv][from]
		delete(models[sv], from)
	}
	const nSrc = 2400
	small := func(i int) string { return strings.Repeat(fmt.Sprintf("s%d.", i), 1+i%40) } // inline
	big := func(i int) string { return strings.Repeat(fmt.Sprintf("big %d|", i), 900+i%50) }
	check := func(round string) {
		t.Helper()
		btrfstest.Check(t, []string{img}, true)
		btrfstest.CheckNewer(t, img, true)
		// Read-only: the kernel's reads would update atimes, copying
		// the shared blocks itself before our writer gets to them.
		dir := btrfstest.Mount(t, "ro", img)
		for _, sv := range slices.Sorted(maps.Keys(models)) {
			got := scanSnapModel(t, filepath.Join(dir, sv))
			if d := snapModelDiff(models[sv], got); len(d) > 0 {
				t.Errorf("%s: kernel's %s differs from the model: %q", round, sv, d)
			}
		}
		btrfstest.Unmount(t, dir)
	}

	// Two sources of two levels or more: src of small (inline) files,
	// data of files in extents.
	w := open()
	_, err := w.CreateSubvolume("src", nil)
	must(err)
	_, err = w.CreateSubvolume("data", nil)
	must(err)
	_, err = w.CreateSubvolume("data2", nil)
	must(err)
	for d := range 20 {
		mkdir(w, "src", fmt.Sprintf("d%02d", d))
		mkdir(w, "data", fmt.Sprintf("d%02d", d))
		mkdir(w, "data2", fmt.Sprintf("d%02d", d))
	}
	for i := range nSrc {
		write(w, "src", fmt.Sprintf("d%02d/f%03d", i%20, i), small(i))
		must(w.Setxattr(fmt.Sprintf("src/d%02d/f%03d", i%20, i), "user.i", []byte(fmt.Sprint(i))))
	}
	for i := range 300 {
		write(w, "data", fmt.Sprintf("d%02d/f%03d", i%20, i), big(i))
		write(w, "data2", fmt.Sprintf("d%02d/f%03d", i%20, i), big(i+7))
	}
	// An extent named by many file extent items (reflinks): by 14
	// inodes, more keyed references than its extent item holds
	// inline, and four times by one leaf (a SHARED_DATA_REF count of
	// four once data copies that leaf), so the references by parent
	// leaf also go past the inline room into items of their own.
	shared := strings.Repeat("0123456789abcdef", 4096)
	write(w, "data", "d00/shared", shared)
	for i := range 14 {
		name := fmt.Sprintf("d%02d/clone%d", i, i)
		write(w, "data", name, "")
		must(w.Clone("data/d00/shared", 0, "data/"+name, 0, 0))
		models["data"][name] = shared
	}
	write(w, "data", "d00/multi", "")
	for i := range 4 {
		must(w.Clone("data/d00/shared", 0, "data/d00/multi", int64(i)*int64(len(shared)), 0))
	}
	models["data"]["d00/multi"] = strings.Repeat(shared, 4)
	must(w.Close())
	if lvl := rootLevel(t, img, "src"); lvl < 2 {
		t.Fatalf("src: root level %d, want a tree of three levels or more", lvl)
	}
	if lvl := rootLevel(t, img, "data"); lvl < 1 {
		t.Fatalf("data: root level %d, want a tree of two levels or more", lvl)
	}

	w = open()
	for _, sv := range []string{"src", "data"} {
		_, err = w.Snapshot(sv, sv+"-ro", &btrfs.SnapshotOptions{ReadOnly: true})
		must(err)
		_, err = w.Snapshot(sv, sv+"-rw", nil)
		must(err)
		models[sv+"-ro"] = maps.Clone(models[sv])
		models[sv+"-rw"] = maps.Clone(models[sv])
	}
	// data2 has one snapshot, writable: data2's copies of its leaves
	// (rule 2) leave them with FULL_BACKREF and one reference,
	// data2-rw's, whose copies then take rule 1 with FULL_BACKREF
	// (keyed data references for the copy, those by the old leaf's
	// address dropped), in the same transaction and in later ones.
	_, err = w.Snapshot("data2", "data2-rw", nil)
	must(err)
	models["data2-rw"] = maps.Clone(models["data2"])
	// Writes in the transaction that made the snapshots.
	write(w, "src", "same-txn", small(1))
	write(w, "src-rw", "same-txn", big(2))
	write(w, "data-rw", "same-txn", small(3))
	remove(w, "src-rw", "d03/f003")
	// data's leaves name file data: its copies of them give the data
	// extents references by the old leaves' addresses (rule 2).
	write(w, "data", "same-txn", big(4))
	remove(w, "data", "d05/f005")
	for i := 2; i < 300; i += 23 {
		write(w, "data2", fmt.Sprintf("d%02d/f%03d", i%20, i), big(i+11))
	}
	write(w, "data", "d00/multi-next", "x")
	must(w.Close())
	check("snapshots")

	// Four rounds of writes into the shared trees, each committed
	// and checked: the first copies most shared blocks, the later ones
	// meet blocks copied before and blocks still shared.
	writable := []string{"src", "src-rw", "data-rw", "data", "data2", "data2-rw"}
	dataSvs := []string{"data-rw", "data", "data2", "data2-rw"}
	rounds := []func(w *btrfs.FS, r int){
		func(w *btrfs.FS, r int) {
			for _, sv := range writable {
				for i := range 30 {
					n := r*1000 + i
					write(w, sv, fmt.Sprintf("d%02d/new%d", (i*7)%20, n), small(n))
					if i%5 == 0 {
						write(w, sv, fmt.Sprintf("d%02d/big%d", (i*3)%20, n), big(n))
					}
				}
				mkdir(w, sv, fmt.Sprintf("dir%d", r))
				write(w, sv, fmt.Sprintf("dir%d/x", r), big(r))
			}
			for _, sv := range writable[:2] {
				for i := r; i < nSrc; i += 37 {
					name := fmt.Sprintf("d%02d/f%03d", i%20, i)
					if _, ok := models[sv][name]; ok {
						remove(w, sv, name)
					}
				}
				for i := r + 5; i < nSrc; i += 41 {
					name := fmt.Sprintf("d%02d/f%03d", i%20, i)
					if _, ok := models[sv][name]; ok {
						write(w, sv, name, small(i+r*7))
					}
				}
				rename(w, sv, fmt.Sprintf("d%02d/f%03d", (nSrc-1-r)%20, nSrc-1-r), fmt.Sprintf("d00/moved%d", r))
			}
			for _, sv := range dataSvs {
				for i := r; i < 300; i += 13 + len(sv) {
					name := fmt.Sprintf("d%02d/f%03d", i%20, i)
					if _, ok := models[sv][name]; ok {
						remove(w, sv, name)
					}
				}
				for i := r + 3; i < 300; i += 17 {
					name := fmt.Sprintf("d%02d/f%03d", i%20, i)
					if _, ok := models[sv][name]; ok {
						write(w, sv, name, big(i+r+len(sv)))
					}
				}
				if from := fmt.Sprintf("d%02d/f%03d", (299-r)%20, 299-r); models[sv][from] != "" {
					rename(w, sv, from, fmt.Sprintf("d01/moved%d", r))
				}
			}
		},
	}
	for r := 1; r <= 4; r++ {
		w = open()
		rounds[0](w, r)
		if r == 4 {
			// src-rw, snapshotted with leaves naming data (its
			// own big files), is written beside its snapshot.
			write(w, "src-rw", "new", "x")
			write(w, "src-rw", "newbig", big(5))
		}
		must(w.Close())
		check(fmt.Sprintf("round %d", r))
		if r == 1 {
			// The copies of shared blocks left them with
			// references by parent (rule 2): tree blocks below
			// nodes, data extents below data's leaves.
			out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "extent", img).CombinedOutput()
			if err != nil {
				t.Fatalf("dump-tree -t extent: %v\n%s", err, out)
			}
			for _, want := range []string{"FULL_BACKREF", "shared block backref", "shared data backref", "SHARED_DATA_REF"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("round 1: extent tree without %q", want)
				}
			}
		}
		if t.Failed() {
			return
		}
		if r == 3 {
			// A snapshot of a snapshot whose blocks copies left
			// with references by parent, and the deletion of the
			// read-only snapshots, whose blocks src and src-rw
			// copied (FULL_BACKREF blocks freed, their children's
			// references by parent dropped); then a fourth round
			// writes into the new snapshot too.
			w = open()
			_, err := w.Snapshot("src-rw", "src-rw-snap", nil)
			must(err)
			models["src-rw-snap"] = maps.Clone(models["src-rw"])
			must(w.DeleteSubvolume("src-ro"))
			delete(models, "src-ro")
			must(w.DeleteSubvolume("data-ro"))
			delete(models, "data-ro")
			must(w.Close())
			check("snapshot and deletions")
			writable = []string{"src", "src-rw-snap", "data-rw", "data", "data2", "data2-rw"}
		}
	}

	// The sources go while their snapshots live on (issue 14, slice
	// e): the blocks they own that the snapshots reach are turned to
	// name their children by address first (FULL_BACKREF, references
	// by parent block and leaf), as the kernel's drop does. Then our
	// writer writes into the snapshots, copying blocks owned by trees
	// that are gone, and at last the snapshots go too, leaving no data
	// extent and no reference by parent behind. src-rw and data-rw are
	// snapshotted once more first and deleted unchanged since: their
	// snapshots then share every node below the root with them (src-rw
	// is three levels deep), which they own without FULL_BACKREF.
	w = open()
	for _, sv := range []string{"src-rw", "data-rw"} {
		_, err := w.Snapshot(sv, sv+"-snap2", nil)
		must(err)
		models[sv+"-snap2"] = maps.Clone(models[sv])
	}
	must(w.Close())
	if lvl := rootLevel(t, img, "src-rw"); lvl < 2 {
		t.Fatalf("src-rw: root level %d, want a tree of three levels or more", lvl)
	}
	w = open()
	for _, sv := range []string{"src", "data", "data2", "src-rw", "data-rw"} {
		must(w.DeleteSubvolume(sv))
		delete(models, sv)
	}
	must(w.Close())
	check("sources deleted")
	writable = []string{"src-rw-snap", "src-rw-snap2", "data-rw-snap2", "data2-rw"}
	dataSvs = []string{"data-rw-snap2", "data2-rw"}
	w = open()
	rounds[0](w, 5)
	must(w.Close())
	check("round 5")
	if t.Failed() {
		return
	}
	w = open()
	for _, sv := range slices.Sorted(maps.Keys(models)) {
		must(w.DeleteSubvolume(sv))
		delete(models, sv)
	}
	must(w.Close())
	check("all deleted")
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "extent", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -t extent: %v\n%s", err, out)
	}
	for _, left := range []string{"flags DATA", "FULL_BACKREF", "shared block backref", "shared data backref", "SHARED_DATA_REF", "EXTENT_DATA_REF"} {
		if strings.Contains(string(out), left) {
			t.Errorf("extent tree after every subvolume went: %q left", left)
		}
	}
	t.Logf("every subvolume deleted, extent tree %d bytes of dump", len(out))
}

// rootLevel returns the level of subvolume sv's root block, as
// dump-tree lists it.
func rootLevel(t *testing.T, img, sv string) int {
	t.Helper()
	r, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.SubvolumeAt(sv)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-r", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree -r: %v\n%s", err, out)
	}
	prefix := fmt.Sprintf("key (%d ROOT_ITEM ", id)
	for _, line := range strings.Split(string(out), "\n") {
		if i := strings.Index(line, prefix); i >= 0 {
			var lvl int
			if j := strings.LastIndex(line, " level "); j >= 0 {
				if _, err := fmt.Sscan(line[j+len(" level "):], &lvl); err == nil {
					return lvl
				}
			}
		}
	}
	t.Fatalf("dump-tree -r: no root of %s (%d):\n%s", sv, id, out)
	return 0
}

// scanSnapModel reads the tree under dir into a model.
func scanSnapModel(t *testing.T, dir string) snapModel {
	t.Helper()
	m := snapModel{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			m[rel] = "/"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// snapModelDiff lists the paths where got differs from want.
func snapModelDiff(want, got snapModel) []string {
	var d []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[p]
		switch {
		case !ok:
			d = append(d, "missing "+p)
		case g != want[p]:
			d = append(d, fmt.Sprintf("%s: %d bytes, want %d", p, len(g), len(want[p])))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			d = append(d, "extra "+p)
		}
	}
	return d
}
