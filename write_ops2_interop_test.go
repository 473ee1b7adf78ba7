package btrfs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"golang.org/x/sys/unix"
)

// ops2Want is the expected kernel view of the interop script: entries
// by path (mtimes not modelled: taken from the scan) and link groups.
type ops2Want struct {
	e     map[string]*btrfstest.Entry
	links map[string][]string // group name -> paths
}

// add records path with its type and permission bits, root-owned.
func (w *ops2Want) add(p string, typ btrfstest.FileType, perm uint32) *btrfstest.Entry {
	e := &btrfstest.Entry{Path: p, Type: typ, Perm: perm, Nlink: 1}
	if typ == btrfstest.TypeRegular {
		s := sha256.Sum256(nil)
		e.SHA256 = hex.EncodeToString(s[:])
	}
	w.e[p] = e
	return e
}

// tree returns the expected Tree, mtimes copied from got.
func (w *ops2Want) tree(got *btrfstest.Tree) *btrfstest.Tree {
	tr := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{}}
	for p, e := range w.e {
		c := *e
		if g := got.Entries[p]; g != nil {
			c.MtimeNs = g.MtimeNs
		}
		tr.Entries[p] = &c
	}
	for _, g := range w.links {
		if len(g) > 1 {
			g = append([]string(nil), g...)
			sort.Strings(g)
			tr.Links = append(tr.Links, g)
		}
	}
	sort.Slice(tr.Links, func(i, j int) bool { return tr.Links[i][0] < tr.Links[j][0] })
	return tr
}

// ops2Run is the interop script's state: where it runs and the model.
type ops2Run struct {
	t    *testing.T
	fsys *btrfs.FS
	w    *ops2Want
}

// must fails the test on err.
func (r *ops2Run) must(err error) {
	r.t.Helper()
	ops2Must(r.t, err)
}

// ops2Script runs every new operation on fsys and returns the expected
// result.
func ops2Script(t *testing.T, fsys *btrfs.FS) *ops2Want {
	t.Helper()
	r := &ops2Run{t: t, fsys: fsys, w: &ops2Want{e: map[string]*btrfstest.Entry{}, links: map[string][]string{}}}
	r.w.add(".", btrfstest.TypeDir, 0o755)
	for _, step := range []func(*ops2Run){ops2Renames, ops2Specials, ops2Attrs, ops2Extrefs, ops2Trees} {
		step(r)
	}
	return r.w
}

// ops2Renames moves names around: files over files, directories across
// directories and over empty ones.
func ops2Renames(r *ops2Run) {
	r.t.Helper()
	r.must(r.fsys.MkdirAll("src/deep/er", 0o750))
	r.must(r.fsys.MkdirAll("src/deep", 0o700)) // exists: nothing changes
	r.must(r.fsys.Mkdir("dst", 0o755))
	r.must(r.fsys.Mkdir("empty", 0o750))
	r.must(r.fsys.CreateEmpty("src/file", 0o644))
	r.must(r.fsys.CreateEmpty("victim", 0o600))
	r.must(r.fsys.Link("victim", "dst/victim-link"))
	r.must(r.fsys.Rename("src/file", "victim")) // file over a file with two links
	r.must(r.fsys.Rename("src", "dst/moved"))   // a directory with contents, across directories
	r.must(r.fsys.Mkdir("dir2", 0o711))
	r.must(r.fsys.CreateEmpty("dir2/inner", 0o640))
	r.must(r.fsys.Rename("dir2", "empty"))     // directory over an empty directory
	r.must(r.fsys.Rename("victim", "victim2")) // inside one directory
	r.w.add("dst", btrfstest.TypeDir, 0o755)
	r.w.add("dst/victim-link", btrfstest.TypeRegular, 0o600)
	r.w.add("dst/moved", btrfstest.TypeDir, 0o750)
	r.w.add("dst/moved/deep", btrfstest.TypeDir, 0o750)
	r.w.add("dst/moved/deep/er", btrfstest.TypeDir, 0o750)
	r.w.add("empty", btrfstest.TypeDir, 0o711)
	r.w.add("empty/inner", btrfstest.TypeRegular, 0o640)
	r.w.add("victim2", btrfstest.TypeRegular, 0o644)
}

// ops2Specials makes symlinks and special files.
func ops2Specials(r *ops2Run) {
	r.t.Helper()
	long := strings.Repeat("abcdefghi/", 300)
	r.must(r.fsys.Symlink("x", "s1"))
	r.must(r.fsys.Symlink(long, "s3000"))
	r.must(r.fsys.Chown("s1", 7, 8))
	r.w.add("s1", btrfstest.TypeSymlink, 0o777).Target = "x"
	r.w.e["s1"].UID, r.w.e["s1"].GID = 7, 8
	r.w.add("s3000", btrfstest.TypeSymlink, 0o777).Target = long
	// The longest inline extent of a 4 KiB leaf: 3970 - 21 bytes.
	r.must(r.fsys.Symlink(strings.Repeat("y", 3949), "s3949"))
	r.w.add("s3949", btrfstest.TypeSymlink, 0o777).Target = strings.Repeat("y", 3949)
	r.must(r.fsys.Mknod("fifo", fs.ModeNamedPipe|0o640, 0))
	r.must(r.fsys.Mknod("sock", fs.ModeSocket|0o755, 0))
	r.must(r.fsys.Mknod("chr", fs.ModeDevice|fs.ModeCharDevice|0o600, unix.Mkdev(300, 400)))
	r.must(r.fsys.Mknod("blk", fs.ModeDevice|0o660, unix.Mkdev(259, 70000)))
	r.w.add("fifo", btrfstest.TypeFifo, 0o640)
	r.w.add("sock", btrfstest.TypeSocket, 0o755)
	c := r.w.add("chr", btrfstest.TypeCharDev, 0o600)
	c.RdevMajor, c.RdevMinor = 300, 400
	b := r.w.add("blk", btrfstest.TypeBlockDev, 0o660)
	b.RdevMajor, b.RdevMinor = 259, 70000
}

// ops2Attrs changes owners and extended attributes.
func ops2Attrs(r *ops2Run) {
	r.t.Helper()
	r.must(r.fsys.CreateEmpty("own", 0o755))
	r.must(r.fsys.Chmod("own", 0o755|fs.ModeSetuid|fs.ModeSetgid))
	r.must(r.fsys.Setxattr("own", "user.a", []byte("1")))
	r.must(r.fsys.Setxattr("own", "user.b", []byte("2")))
	r.must(r.fsys.Removexattr("own", "user.a"))
	r.must(r.fsys.Chown("own", 1000, -1)) // clears set-uid and (group-executable) set-gid
	r.must(r.fsys.Chown("own", -1, 2000))
	o := r.w.add("own", btrfstest.TypeRegular, 0o755)
	o.UID, o.GID, o.Xattrs = 1000, 2000, map[string]string{"user.b": "2"}
	r.must(r.fsys.Mkdir("odir", 0o755|fs.ModeSetgid))
	r.must(r.fsys.Chown("odir", 10, 20)) // directories keep set-gid
	d := r.w.add("odir", btrfstest.TypeDir, 0o2755)
	d.UID, d.GID = 10, 20
}

// ops2Extrefs links one file 340 times in one directory (INODE_EXTREF)
// and renames and removes names of both kinds.
func ops2Extrefs(r *ops2Run) {
	r.t.Helper()
	r.must(r.fsys.MkdirAll("x/links", 0o755))
	r.must(r.fsys.CreateEmpty("x/target", 0o644))
	for i := 0; i < 340; i++ {
		r.must(r.fsys.Link("x/target", "x/links/"+ops2LinkName(i)))
	}
	r.must(r.fsys.Rename("x/links/"+ops2LinkName(5), "x/links/renamed-5"))
	r.must(r.fsys.Rename("x/links/"+ops2LinkName(335), "x/renamed-335"))
	r.must(r.fsys.Remove("x/links/" + ops2LinkName(336)))
	r.must(r.fsys.Remove("x/links/" + ops2LinkName(1)))
	r.w.add("x", btrfstest.TypeDir, 0o755)
	r.w.add("x/links", btrfstest.TypeDir, 0o755)
	group := []string{"x/target", "x/links/renamed-5", "x/renamed-335"}
	for i := 0; i < 340; i++ {
		if i != 1 && i != 5 && i != 335 && i != 336 {
			group = append(group, "x/links/"+ops2LinkName(i))
		}
	}
	for _, p := range group {
		r.w.add(p, btrfstest.TypeRegular, 0o644).Nlink = uint32(len(group))
	}
	r.w.links["x"] = group
}

// ops2Trees removes a tree with RemoveAll and makes one with MkdirAll.
func ops2Trees(r *ops2Run) {
	r.t.Helper()
	r.must(r.fsys.MkdirAll("tree/a/b/c", 0o755))
	r.must(r.fsys.CreateEmpty("tree/a/f", 0o644))
	r.must(r.fsys.Symlink("../f", "tree/a/b/l"))
	r.must(r.fsys.Mknod("tree/a/b/c/p", fs.ModeNamedPipe|0o600, 0))
	r.must(r.fsys.CreateEmpty("tree/a/b/keep", 0o644))
	r.must(r.fsys.Link("tree/a/b/keep", "kept"))
	r.must(r.fsys.Link("tree/a/f", "tree/a/b/c/f2"))
	r.must(r.fsys.Setxattr("tree/a", "user.z", []byte("z")))
	r.must(r.fsys.RemoveAll("tree"))
	r.w.add("kept", btrfstest.TypeRegular, 0o644)
	r.must(r.fsys.Mkdir("m", 0o700))
	r.must(r.fsys.MkdirAll("m/n/o", 0o751))
	r.w.add("m", btrfstest.TypeDir, 0o700)
	r.w.add("m/n", btrfstest.TypeDir, 0o751)
	r.w.add("m/n/o", btrfstest.TypeDir, 0o751)
}

// ops2Compare diffs a scan (kernel or our read view) with the model.
func ops2Compare(t *testing.T, what string, w *ops2Want, got *btrfstest.Tree) {
	t.Helper()
	for _, d := range btrfstest.Diff(w.tree(got), got, btrfstest.DiffOptions{CompareNlink: true}) {
		t.Errorf("%s: %s", what, d)
	}
}

// ops2Read builds the Tree our read view shows, as Scan does for a mount.
func ops2Read(t *testing.T, fsys *btrfs.FS) *btrfstest.Tree {
	t.Helper()
	tr := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{}}
	groups := map[[2]uint64][]string{} // by subvolume and inode
	err := fs.WalkDir(fsys, ".", func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := fsys.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*btrfs.Stat)
		e := &btrfstest.Entry{Path: p, Ino: st.Ino, Perm: st.Mode & 0o7777, UID: st.UID, GID: st.GID,
			Nlink: st.Nlink, Size: int64(st.Size), MtimeNs: st.Mtime.UnixNano()}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = btrfstest.TypeDir
		case unix.S_IFREG:
			e.Type = btrfstest.TypeRegular
			data, err := fsys.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(data)
			e.SHA256 = hex.EncodeToString(s[:])
		case unix.S_IFLNK:
			e.Type = btrfstest.TypeSymlink
			if e.Target, err = fsys.ReadLink(p); err != nil {
				return err
			}
		case unix.S_IFIFO:
			e.Type = btrfstest.TypeFifo
		case unix.S_IFSOCK:
			e.Type = btrfstest.TypeSocket
		case unix.S_IFCHR:
			e.Type, e.RdevMajor, e.RdevMinor = btrfstest.TypeCharDev, st.RdevMajor, st.RdevMinor
		case unix.S_IFBLK:
			e.Type, e.RdevMajor, e.RdevMinor = btrfstest.TypeBlockDev, st.RdevMajor, st.RdevMinor
		}
		xs, err := fsys.Xattrs(p)
		if err != nil {
			return err
		}
		for _, x := range xs {
			if e.Xattrs == nil {
				e.Xattrs = map[string]string{}
			}
			e.Xattrs[x.Name] = string(x.Value)
		}
		tr.Entries[p] = e
		if e.Type != btrfstest.TypeDir {
			k := [2]uint64{st.Subvolume, st.Ino}
			groups[k] = append(groups[k], p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking our read view: %v", err)
	}
	for _, g := range groups {
		if len(g) > 1 {
			sort.Strings(g)
			tr.Links = append(tr.Links, g)
		}
	}
	sort.Slice(tr.Links, func(i, j int) bool { return tr.Links[i][0] < tr.Links[j][0] })
	return tr
}

// TestOps2Interop runs the script on 4 KiB and 16 KiB node images, then
// checks btrfs check, a kernel mount and our read view against the model;
// then the kernel renames and unlinks our entries (extref names among
// them), and we read its result and change it again.
func TestOps2Interop(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, ns := range []int{4096, 16384} {
		t.Run(fmt.Sprint(ns), func(t *testing.T) { ops2Interop(t, ns) })
	}
}

func ops2Interop(t *testing.T, ns int) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: ns})
	fsys := ops2Open(t, img)
	w := ops2Script(t, fsys)
	ops2Must(t, fsys.Commit())
	ops2Compare(t, "our read view", w, ops2Read(t, fsys))
	ops2Must(t, fsys.Close())
	btrfstest.Check(t, []string{img}, false)
	if ops2DumpCount(t, img, "INODE_EXTREF") == 0 {
		t.Error("no INODE_EXTREF item written")
	}
	dir := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(dir)
	ops2Must(t, err)
	ops2Compare(t, "kernel", w, got)
	btrfstest.Unmount(t, dir)
	ops2KernelChanges(t, img)
	ops2SecondSession(t, img)
}

// ops2KernelChanges has the kernel rename and unlink entries we made
// (extref names among them), make a device node and a subvolume.
func ops2KernelChanges(t *testing.T, img string) {
	dir := btrfstest.Mount(t, "", img)
	k := func(p string) string { return filepath.Join(dir, p) }
	ops2Must(t, os.Rename(k("x/links/"+ops2LinkName(300)), k("x/kernel-300")))
	ops2Must(t, os.Remove(k("x/links/"+ops2LinkName(339))))
	ops2Must(t, os.Remove(k("x/links/"+ops2LinkName(2))))
	ops2Must(t, os.Rename(k("dst/moved"), k("m/n/moved")))
	ops2Must(t, os.Rename(k("s3000"), k("empty/inner"))) // symlink over a file
	ops2Must(t, os.Remove(k("chr")))
	ops2Must(t, unix.Mknod(k("kchr"), unix.S_IFCHR|0o640, int(unix.Mkdev(511, 65537))))
	ops2Must(t, os.Remove(k("s1")))
	ops2Must(t, exec.Command("btrfs", "subvolume", "create", k("sv")).Run())
	ops2Must(t, os.WriteFile(k("sv/f"), []byte("in a subvolume"), 0o644))
	ops2Must(t, exec.Command("btrfs", "subvolume", "create", k("m/n/o/sv2")).Run())
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, false)
}

// ops2SecondSession reads what the kernel changed and changes it again.
func ops2SecondSession(t *testing.T, img string) {
	fsys := ops2Open(t, img)
	fi, err := fsys.Lstat("x/kernel-300")
	ops2Must(t, err)
	if n := fi.Sys().(*btrfs.Stat).Nlink; n != 337 {
		t.Errorf("nlink after the kernel's unlinks: %d, want 337", n)
	}
	fi, err = fsys.Lstat("kchr")
	ops2Must(t, err)
	if st := fi.Sys().(*btrfs.Stat); st.RdevMajor != 511 || st.RdevMinor != 65537 {
		t.Errorf("kernel's device node reads as %d:%d, want 511:65537", st.RdevMajor, st.RdevMinor)
	}
	if target, err := fsys.ReadLink("empty/inner"); err != nil || target != strings.Repeat("abcdefghi/", 300) {
		t.Errorf("symlink renamed by the kernel: %.20q %v", target, err)
	}
	ops2Check(t, []ops2Case{
		{"link into subvolume", func() error { return fsys.Link("kept", "sv/k") }, syscall.EXDEV, true},
		{"rename into subvolume", func() error { return fsys.Rename("kept", "sv/k") }, syscall.EXDEV, true},
		// A subvolume is never replaced by a rename, and rmdir of one
		// that is not empty fails, as on Linux (moves of subvolumes
		// themselves work: below).
		{"rename subvolume over subvolume", func() error { return fsys.Rename("sv", "m/n/o/sv2") }, syscall.ENOTEMPTY, true},
		{"remove subvolume", func() error { return fsys.Remove("sv") }, syscall.ENOTEMPTY, false},
	})
	// RemoveAll deletes the subvolumes it meets, as rm -r does on Linux,
	// but not the default one (EPERM), and then removes nothing.
	sv2, err := fsys.SubvolumeAt("m/n/o/sv2")
	ops2Must(t, err)
	ops2Must(t, fsys.SetDefaultSubvolume(sv2))
	ops2Check(t, []ops2Case{
		{"removeall around the default subvolume", func() error { return fsys.RemoveAll("m/n") }, syscall.EPERM, false},
	})
	ops2Must(t, fsys.SetDefaultSubvolume(5))
	ops2Must(t, fsys.Rename("sv", "x/sv-moved"))
	if _, err := fsys.Lstat("m/n/o/sv2"); err != nil {
		t.Errorf("m/n/o/sv2 after a refused RemoveAll: %v", err)
	}
	// And we change the kernel's result: remove extref names, the moved
	// tree, the kernel's node.
	ops2Must(t, fsys.Remove("x/links/"+ops2LinkName(338)))
	ops2Must(t, fsys.Rename("x/kernel-300", "x/links/ours-300"))
	ops2Must(t, fsys.RemoveAll("m/n/moved"))
	ops2Must(t, fsys.RemoveAll("m/n/o")) // the kernel's subvolume sv2 with it
	ops2Must(t, fsys.Remove("kchr"))
	ops2Must(t, fsys.Rename("empty/inner", "dst/victim-link")) // symlink over a file
	ops2Must(t, fsys.Commit())
	fi, err = fsys.Lstat("x/target")
	ops2Must(t, err)
	if n := fi.Sys().(*btrfs.Stat).Nlink; n != 336 {
		t.Errorf("nlink after our second session: %d, want 336", n)
	}
	ours := ops2Read(t, fsys)
	ops2Must(t, fsys.Close())
	btrfstest.Check(t, []string{img}, false)
	ops2FinalCheck(t, img, ours)
}

// ops2FinalCheck compares the kernel's view after both sessions with
// ours, and checks what the second session did.
func ops2FinalCheck(t *testing.T, img string, ours *btrfstest.Tree) {
	dir := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(dir)
	ops2Must(t, err)
	for _, d := range btrfstest.Diff(got, ours, btrfstest.DiffOptions{CompareNlink: true, IgnoreHoles: true}) {
		t.Errorf("kernel vs our read view: %s", d)
	}
	if e := got.Entries["dst/victim-link"]; e == nil || e.Type != btrfstest.TypeSymlink {
		t.Errorf("dst/victim-link after rename over it: %+v", e)
	}
	for _, p := range []string{"m/n/moved", "m/n/o", "kchr", "chr", "s1", "sv", "x/links/ours-300", "x/sv-moved/f"} {
		if _, ok := got.Entries[p]; ok != (p == "x/links/ours-300" || p == "x/sv-moved/f") {
			t.Errorf("%s: present %v", p, ok)
		}
	}
	if e := got.Entries["x/target"]; e == nil || e.Nlink != 336 {
		t.Errorf("x/target after both sessions: %+v", e)
	}
}
