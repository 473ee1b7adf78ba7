//go:build linux

package btrfs_test

import (
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

// TestSnapshotSendIncremental has the kernel send, with `btrfs send -p`,
// the difference between two read-only snapshots our writer made of a
// subvolume of three levels (4 KiB nodes): inline files and files in
// extents, xattrs, owners and modes, hardlinks and symlinks, changed
// between the snapshots by our writer (writes inline and into extents,
// truncates, removals, renames of files and directories, new and removed
// links, xattrs set and removed, reflinks within the subvolume and out of
// the first snapshot). The first snapshot is sent in full into a fresh
// kernel filesystem, then the second and a third as deltas (each against
// the one before); every received snapshot equals ours as the kernel
// shows it: names, modes, owners, sizes, contents, xattrs, link counts;
// and each delta stream is a small part of the full one.
func TestSnapshotSendIncremental(t *testing.T) {
	btrfstest.RequireInterop(t)
	rng := rand.New(rand.NewPCG(testSeed(t), 19))
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20, NodeSize: 4096}); err != nil {
		t.Fatal(err)
	}
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]uint64{}
	if ids["sv"], err = w.CreateSubvolume("sv", nil); err != nil {
		t.Fatal(err)
	}
	m := &sendModel{t: t, w: w, rng: rng, files: map[string]*sendInode{}}
	m.fill(3000)
	snaps := []string{"s1", "s2", "s3"}
	for i, s := range snaps {
		if i > 0 {
			m.change(snaps[i-1], 250)
		}
		if ids[s], err = w.Snapshot("sv", s, &btrfs.SnapshotOptions{ReadOnly: true}); err != nil {
			t.Fatal(err)
		}
		m.snaps[s] = map[string]int64{}
		for p, in := range m.files {
			m.snaps[s][p] = in.size
		}
	}
	t.Logf("%d changes, %v", m.n, m.counts)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	for _, s := range append([]string{"sv"}, snaps...) {
		if lvl := subvolLevel(t, img, s); lvl < 2 {
			t.Fatalf("%s: root level %d, want 2 or more", s, lvl)
		}
	}
	// As the kernel keeps them: sv's ctransid is the transaction of its
	// last change, and each snapshot has its source's, so they grow
	// from snapshot to snapshot (what receive and backup tools read as
	// "changed since").
	root := dumpTree(t, img, "root")
	ctransid := func(s string) uint64 {
		t.Helper()
		item := rootItemText(root, ids[s])
		var v uint64
		if i := strings.Index(item, "ctransid "); i < 0 {
			t.Fatalf("%s: no ctransid in\n%s", s, item)
		} else if _, err := fmt.Sscan(item[i+len("ctransid "):], &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i := 1; i < len(snaps); i++ {
		if a, b := ctransid(snaps[i-1]), ctransid(snaps[i]); a >= b {
			t.Errorf("ctransid %d of %s, %d of %s: want it to grow with the changes", a, snaps[i-1], b, snaps[i])
		}
	}
	if a, b := ctransid("sv"), ctransid(snaps[len(snaps)-1]); a != b {
		t.Errorf("ctransid %d of sv, %d of its snapshot %s taken after its last change", a, b, snaps[len(snaps)-1])
	}

	ours := btrfstest.Mount(t, "ro", img)
	theirs := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 512 << 20}))
	for i, s := range snaps {
		if i == 0 {
			sendReceive(t, theirs, filepath.Join(ours, s))
		} else {
			sendReceive(t, theirs, "-p", filepath.Join(ours, snaps[i-1]), filepath.Join(ours, s))
			// The kernel's send -p walks both trees and skips what
			// they share: a delta holding much more than the changes
			// would mean our writer rewrote what it did not change.
			full, delta := sendSize(t, filepath.Join(ours, s)), sendSize(t, "-p", filepath.Join(ours, snaps[i-1]), filepath.Join(ours, s))
			t.Logf("%s: full stream %d bytes, from %s %d bytes", s, full, snaps[i-1], delta)
			if delta > full/4 {
				t.Errorf("%s: the stream from %s is %d bytes, the full one %d", s, snaps[i-1], delta, full)
			}
		}
		want, err := btrfstest.Scan(filepath.Join(ours, s))
		if err != nil {
			t.Fatal(err)
		}
		got, err := btrfstest.Scan(filepath.Join(theirs, s))
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Entries) < 3000 {
			t.Fatalf("%s: %d entries", s, len(want.Entries))
		}
		// Holes are not compared (contents are): where a hole took
		// the place of data since the parent, the kernel's send
		// writes zeros (seen with the kernel's own snapshots too: a
		// file truncated down and up again is received with data
		// where the sent one has a hole).
		if d := btrfstest.Diff(want, got, btrfstest.DiffOptions{IgnoreDirMtime: true, IgnoreHoles: true, CompareNlink: true}); len(d) > 0 {
			t.Errorf("%s received (from %s) differs from ours: %d differences: %q", s, map[bool]string{true: "a full send", false: "a send -p"}[i == 0], len(d), d[:min(len(d), 20)])
		}
	}
	btrfstest.Unmount(t, theirs)
	btrfstest.Unmount(t, ours)
}

// sendModel makes the files of TestSnapshotSendIncremental and changes
// them, keeping the regular files' paths and sizes (files) so that it
// can pick targets.
type sendModel struct {
	t      *testing.T
	w      *btrfs.FS
	rng    *rand.Rand
	files  map[string]*sendInode       // regular files under sv, by path (links share one)
	snaps  map[string]map[string]int64 // files as each snapshot holds them, under sv
	dirs   []string
	n      int
	counts map[string]int
}

// sendInode is a regular file of sendModel, shared by its links.
type sendInode struct{ size int64 }

func (m *sendModel) must(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

// data is n bytes of pseudo-random text.
func (m *sendModel) data(n int) []byte {
	b := make([]byte, n)
	word := fmt.Sprintf("send %d ", m.rng.IntN(100000))
	for i := range b {
		b[i] = word[i%len(word)]
	}
	// Incompressible here and there.
	for i := 0; i < n; i += 1 + m.rng.IntN(64) {
		b[i] = byte(m.rng.UintN(256))
	}
	return b
}

func (m *sendModel) write(p string, n int) {
	m.t.Helper()
	m.must(m.w.WriteFile(p, m.data(n), 0o644))
	if in := m.files[p]; in != nil {
		in.size = int64(n)
		return
	}
	m.files[p] = &sendInode{int64(n)}
}

// fill makes n files in 24 directories: one in nine in extents, the rest
// inline; some with xattrs, other owners and modes, hardlinks (in
// links/), symlinks.
func (m *sendModel) fill(n int) {
	m.snaps = map[string]map[string]int64{}
	m.counts = map[string]int{}
	for d := range 24 {
		m.dirs = append(m.dirs, fmt.Sprintf("sv/d%02d", d))
		m.must(m.w.Mkdir(m.dirs[d], 0o755))
	}
	m.must(m.w.Mkdir("sv/links", 0o700))
	for i := range n {
		p := fmt.Sprintf("%s/f%04d", m.dirs[i%24], i)
		size := 10 + m.rng.IntN(600)
		if i%9 == 0 {
			size = 4096 + m.rng.IntN(40000)
		}
		m.write(p, size)
		if i%13 == 0 {
			m.must(m.w.Setxattr(p, "user.tag", []byte(fmt.Sprintf("tag %d", i))))
		}
		if i%17 == 0 {
			m.must(m.w.Chown(p, 1000+i%3, 100+i%2))
		}
		if i%11 == 0 {
			m.must(m.w.Chmod(p, 0o600))
		}
		if i%29 == 0 {
			l := fmt.Sprintf("sv/links/l%04d", i)
			m.must(m.w.Link(p, l))
			m.files[l] = m.files[p]
		}
		if i%31 == 0 {
			m.must(m.w.Symlink(fmt.Sprintf("../d%02d/f%04d", (i+1)%24, i+1), fmt.Sprintf("%s/s%04d", m.dirs[i%24], i)))
		}
	}
}

// change makes n changes to sv; parent is the last snapshot, the source
// of some reflinks.
func (m *sendModel) change(parent string, n int) {
	m.t.Helper()
	for done := 0; done < n; {
		names := slices.Sorted(maps.Keys(m.files))
		p := names[m.rng.IntN(len(names))]
		in := m.files[p]
		size := in.size
		k := m.rng.IntN(15)
		what := ""
		switch k {
		case 0: // a new file, inline or in an extent
			size := m.rng.IntN(800)
			if m.rng.IntN(2) == 0 {
				size = 4096 + m.rng.IntN(30000)
			}
			m.write(fmt.Sprintf("%s/new%d", m.dirs[m.rng.IntN(len(m.dirs))], m.n), size)
			what = "create"
		case 1: // rewritten
			m.write(p, m.rng.IntN(2000))
			what = "rewrite"
		case 2: // written into, maybe past its end
			off := m.rng.Int64N(size + 1)
			b := m.data(1 + m.rng.IntN(9000))
			_, err := m.w.WriteAt(p, b, off)
			m.must(err)
			in.size = max(size, off+int64(len(b)))
			what = "write"
		case 3:
			ns := m.rng.Int64N(size + 20000)
			m.must(m.w.Truncate(p, ns))
			in.size = ns
			what = "truncate"
		case 4:
			m.must(m.w.Remove(p))
			delete(m.files, p)
			what = "remove"
		case 5: // renamed, into another directory or over another file
			to := fmt.Sprintf("%s/mv%d", m.dirs[m.rng.IntN(len(m.dirs))], m.n)
			if m.rng.IntN(3) == 0 {
				to = names[m.rng.IntN(len(names))]
				if m.files[to] == in { // links of one inode: a no-op on Linux
					continue
				}
			}
			m.must(m.w.Rename(p, to))
			m.files[to] = in
			delete(m.files, p)
			what = "rename"
		case 6: // a new hardlink
			l := fmt.Sprintf("sv/links/n%d", m.n)
			m.must(m.w.Link(p, l))
			m.files[l] = in
			what = "link"
		case 7:
			m.must(m.w.Setxattr(p, fmt.Sprintf("user.x%d", m.rng.IntN(3)), m.data(m.rng.IntN(200))))
			what = "setxattr"
		case 8:
			if err := m.w.Removexattr(p, "user.tag"); err != nil {
				continue // it has none
			}
			what = "removexattr"
		case 9:
			m.must(m.w.Chmod(p, []fs.FileMode{0o640, 0o755}[m.rng.IntN(2)]))
			m.must(m.w.Chown(p, 2000+m.rng.IntN(3), 2000))
			what = "chmod/chown"
		case 10, 11: // a reflink out of the parent snapshot into a new file
			snap := m.snaps[parent]
			src := m.pick(slices.Sorted(maps.Keys(snap)), func(q string) int64 { return snap[q] }, 4096)
			if src == "" {
				continue
			}
			ss := snap[src]
			dst := fmt.Sprintf("%s/ref%d", m.dirs[m.rng.IntN(len(m.dirs))], m.n)
			m.must(m.w.CreateEmpty(dst, 0o644))
			length := ss / 4096 * 4096
			m.must(m.w.Clone(parent+strings.TrimPrefix(src, "sv"), 0, dst, 0, length))
			m.files[dst] = &sendInode{length}
			what = "reflink from " + parent
		case 12: // a reflink within sv, over part of another file
			src := m.pick(names, func(q string) int64 { return m.files[q].size }, 8192)
			if src == "" || m.files[src] == in {
				continue
			}
			ss := m.files[src].size
			so := m.rng.Int64N(ss/4096) * 4096
			length := ss/4096*4096 - so
			do := m.rng.Int64N(size/4096+1) * 4096
			m.must(m.w.Clone(src, so, p, do, length))
			in.size = max(size, do+length)
			what = "reflink"
		case 13: // a directory renamed
			i := m.rng.IntN(len(m.dirs))
			from, to := m.dirs[i], fmt.Sprintf("sv/dir%d", m.n)
			m.must(m.w.Rename(from, to))
			m.dirs[i] = to
			for q, s := range maps.Clone(m.files) {
				if rest, ok := strings.CutPrefix(q, from+"/"); ok {
					delete(m.files, q)
					m.files[to+"/"+rest] = s
				}
			}
			what = "rename directory"
		case 14:
			l := fmt.Sprintf("%s/sym%d", m.dirs[m.rng.IntN(len(m.dirs))], m.n)
			m.must(m.w.Symlink(p[len("sv/"):], l))
			what = "symlink"
		}
		m.n++
		done++
		m.counts[what]++
	}
}

// pick returns one of names at least min bytes long (size tells), ""
// if the draw found none.
func (m *sendModel) pick(names []string, size func(string) int64, min int64) string {
	for range 20 {
		if p := names[m.rng.IntN(len(names))]; size(p) >= min {
			return p
		}
	}
	return ""
}

// sendSize returns the size of the stream of `btrfs send` with args.
func sendSize(t *testing.T, args ...string) int64 {
	t.Helper()
	send := exec.Command("btrfs", append([]string{"send", "-q"}, args...)...)
	var serr strings.Builder
	send.Stderr = &serr
	out, err := send.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, out)
	if werr := send.Wait(); err != nil || werr != nil {
		t.Fatalf("btrfs send %v: %v %v\n%s", args, err, werr, serr.String())
	}
	return n
}
