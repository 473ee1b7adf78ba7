//go:build linux

package btrfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// logCase is one kind of change the kernel logs: setup runs and is
// committed (sync), then ops runs with its fsyncs and the image is copied
// before the next commit, log and all.
type logCase struct {
	name  string
	setup func(t *testing.T, dir string)
	ops   func(t *testing.T, dir string)
	// nodeSize is mkfs -n (0: the default).
	nodeSize int
	// mount adds mount options to commit=300.
	mount string
	// size is the image size (0: btrfstest's default).
	size int64
}

// fsyncPath opens p (a file or directory) and fsyncs it.
func fsyncPath(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	logMust(t, err)
	defer f.Close()
	logMust(t, f.Sync())
}

// writeSync writes data to p at off (creating p) and fsyncs it.
func writeSync(t *testing.T, p string, data []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	logMust(t, err)
	defer f.Close()
	_, err = f.WriteAt(data, off)
	logMust(t, err)
	logMust(t, f.Sync())
}

func logCases() []logCase {
	return []logCase{
		{"new-files", func(t *testing.T, dir string) {
			logMust(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
		}, func(t *testing.T, dir string) {
			writeSync(t, filepath.Join(dir, "d/new"), pattern(100000, 1), 0)
			writeSync(t, filepath.Join(dir, "d/small"), []byte("inline bytes"), 0)
		}, 0, "", 0},
		{"append-overwrite", func(t *testing.T, dir string) {
			logMust(t, os.WriteFile(filepath.Join(dir, "f"), pattern(50000, 2), 0o644))
			logMust(t, os.WriteFile(filepath.Join(dir, "g"), pattern(3000, 3), 0o644))
		}, func(t *testing.T, dir string) {
			writeSync(t, filepath.Join(dir, "f"), pattern(8192, 9), 8192)
			writeSync(t, filepath.Join(dir, "f"), pattern(30000, 4), 50000)
			writeSync(t, filepath.Join(dir, "g"), pattern(20000, 5), 3000)
		}, 0, "", 0},
		{"rename-link", func(t *testing.T, dir string) {
			logMust(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
			logMust(t, os.WriteFile(filepath.Join(dir, "x"), pattern(9000, 6), 0o644))
			logMust(t, os.WriteFile(filepath.Join(dir, "d/w"), []byte("w"), 0o644))
		}, func(t *testing.T, dir string) {
			logMust(t, os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "d/y")))
			logMust(t, os.Link(filepath.Join(dir, "d/y"), filepath.Join(dir, "d/z")))
			fsyncPath(t, filepath.Join(dir, "d/y"))
			logMust(t, os.Rename(filepath.Join(dir, "d/w"), filepath.Join(dir, "d/w2")))
			fsyncPath(t, filepath.Join(dir, "d/w2"))
		}, 0, "", 0},
		{"unlink-fsync-dir", func(t *testing.T, dir string) {
			logMust(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
			for _, n := range []string{"a", "b", "c"} {
				logMust(t, os.WriteFile(filepath.Join(dir, "d", n), pattern(5000, 7), 0o644))
			}
		}, func(t *testing.T, dir string) {
			logMust(t, os.Remove(filepath.Join(dir, "d/a")))
			logMust(t, os.Remove(filepath.Join(dir, "d/c")))
			fsyncPath(t, filepath.Join(dir, "d"))
		}, 0, "", 0},
		{"xattrs", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			logMust(t, os.WriteFile(p, []byte("x"), 0o644))
			logMust(t, unix.Setxattr(p, "user.a", []byte("1"), 0))
			logMust(t, unix.Setxattr(p, "user.keep", []byte("k"), 0))
		}, func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			logMust(t, unix.Setxattr(p, "user.b", []byte("2"), 0))
			logMust(t, unix.Removexattr(p, "user.a"))
			logMust(t, unix.Setxattr(p, "user.keep", []byte("changed"), 0))
			fsyncPath(t, p)
		}, 0, "", 0},
		{"fsync-new-dir", func(t *testing.T, dir string) {
			logMust(t, os.Mkdir(filepath.Join(dir, "top"), 0o755))
		}, func(t *testing.T, dir string) {
			d := filepath.Join(dir, "top/d2")
			logMust(t, os.Mkdir(d, 0o750))
			logMust(t, os.WriteFile(filepath.Join(d, "e1"), nil, 0o600))
			logMust(t, os.WriteFile(filepath.Join(d, "e2"), []byte("two"), 0o644))
			logMust(t, os.Mkdir(filepath.Join(d, "sub"), 0o755))
			fsyncPath(t, d)
		}, 0, "", 0},
		{"truncate-prealloc", func(t *testing.T, dir string) {
			logMust(t, os.WriteFile(filepath.Join(dir, "big"), pattern(200000, 12), 0o644))
			logMust(t, os.WriteFile(filepath.Join(dir, "pre"), pattern(10000, 13), 0o644))
		}, func(t *testing.T, dir string) {
			logMust(t, os.Truncate(filepath.Join(dir, "big"), 70000))
			fsyncPath(t, filepath.Join(dir, "big"))
			f, err := os.OpenFile(filepath.Join(dir, "pre"), os.O_RDWR, 0)
			logMust(t, err)
			logMust(t, unix.Fallocate(int(f.Fd()), 0, 0, 1<<20))
			_, err = f.WriteAt(pattern(5000, 14), 300000)
			logMust(t, err)
			logMust(t, f.Sync())
			f.Close()
		}, 0, "", 0},
		{"many-files", func(t *testing.T, dir string) {
			logMust(t, os.Mkdir(filepath.Join(dir, "m"), 0o755))
			for i := range 50 {
				logMust(t, os.WriteFile(filepath.Join(dir, "m", "old"+string(rune('a'+i%26))+string(rune('a'+i/26))), pattern(3000+i, byte(i)), 0o644))
			}
		}, func(t *testing.T, dir string) {
			for i := range 300 {
				name := filepath.Join(dir, "m", "n"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)))
				logMust(t, os.WriteFile(name, pattern(100+i*37, byte(i)), 0o644))
			}
			for i := range 20 {
				logMust(t, os.Remove(filepath.Join(dir, "m", "old"+string(rune('a'+i%26))+string(rune('a'+i/26)))))
			}
			fsyncPath(t, filepath.Join(dir, "m"))
			fsyncPath(t, filepath.Join(dir, "m", "naaa"))
		}, 0, "", 0},
		{"rename-over-symlink", func(t *testing.T, dir string) {
			logMust(t, os.WriteFile(filepath.Join(dir, "victim"), pattern(7000, 15), 0o644))
			logMust(t, os.WriteFile(filepath.Join(dir, "src"), pattern(6000, 16), 0o644))
			logMust(t, os.Mkdir(filepath.Join(dir, "gone"), 0o755))
		}, func(t *testing.T, dir string) {
			logMust(t, os.Rename(filepath.Join(dir, "src"), filepath.Join(dir, "victim")))
			logMust(t, os.Symlink("victim", filepath.Join(dir, "ln")))
			logMust(t, os.Remove(filepath.Join(dir, "gone")))
			fsyncPath(t, dir)
			fsyncPath(t, filepath.Join(dir, "victim"))
		}, 0, "", 0},
		{"hardlinks-extref", func(t *testing.T, dir string) {
			logMust(t, os.Mkdir(filepath.Join(dir, "l"), 0o755))
			logMust(t, os.WriteFile(filepath.Join(dir, "l/t"), pattern(100, 17), 0o644))
			// Long names overflow the INODE_REF item: INODE_EXTREFs.
			for i := range 20 {
				logMust(t, os.Link(filepath.Join(dir, "l/t"), filepath.Join(dir, "l", longName(i))))
			}
		}, func(t *testing.T, dir string) {
			// The kernel commits instead of logging new links of an
			// inode with extrefs; it logs a data change with all names.
			writeSync(t, filepath.Join(dir, "l/t"), pattern(9000, 18), 100)
		}, 4096, "", 0},
		{"subvolume", func(t *testing.T, dir string) {
			logMust(t, exec.Command("btrfs", "subvolume", "create", filepath.Join(dir, "sv")).Run())
			logMust(t, os.WriteFile(filepath.Join(dir, "sv/old"), pattern(5000, 19), 0o644))
		}, func(t *testing.T, dir string) {
			writeSync(t, filepath.Join(dir, "sv/new"), pattern(40000, 20), 0)
			writeSync(t, filepath.Join(dir, "sv/old"), pattern(4096, 21), 4096)
			writeSync(t, filepath.Join(dir, "top"), pattern(5000, 22), 0)
		}, 0, "", 0},
		{"dir-with-subvolume", func(t *testing.T, dir string) {
			logMust(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
			logMust(t, os.WriteFile(filepath.Join(dir, "d/a"), []byte("a"), 0o644))
			logMust(t, exec.Command("btrfs", "subvolume", "create", filepath.Join(dir, "d/sv")).Run())
			logMust(t, os.WriteFile(filepath.Join(dir, "d/sv/in"), []byte("in"), 0o644))
		}, func(t *testing.T, dir string) {
			logMust(t, os.WriteFile(filepath.Join(dir, "d/b"), pattern(9000, 23), 0o644))
			logMust(t, os.Remove(filepath.Join(dir, "d/a")))
			fsyncPath(t, filepath.Join(dir, "d"))
			fsyncPath(t, filepath.Join(dir, "d/b"))
		}, 0, "", 0},
		{"compressed", func(t *testing.T, dir string) {
			logMust(t, os.WriteFile(filepath.Join(dir, "c"), bytes.Repeat([]byte("compress me "), 20000), 0o644))
		}, func(t *testing.T, dir string) {
			writeSync(t, filepath.Join(dir, "c"), bytes.Repeat([]byte("again "), 30000), 100000)
			writeSync(t, filepath.Join(dir, "z"), bytes.Repeat([]byte("zzz "), 50000), 0)
		}, 0, "compress=zstd", 0},
	}
}

// longName is the i-th of the long link names.
func longName(i int) string {
	return string(bytes.Repeat([]byte{'a' + byte(i%26)}, 200)) + string(rune('A'+i/26))
}

// makeLogImage runs c on a new kernel filesystem mounted with a long
// commit interval and returns a copy of the image taken after the fsyncs,
// before any commit: a filesystem with a log to replay.
func makeLogImage(t *testing.T, c logCase) string {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: c.nodeSize, Size: c.size})
	opts := "commit=300"
	if c.mount != "" {
		opts += "," + c.mount
	}
	dir := btrfstest.Mount(t, opts, img)
	c.setup(t, dir)
	logMust(t, exec.Command("btrfs", "filesystem", "sync", dir).Run())
	c.ops(t, dir)
	cp := filepath.Join(t.TempDir(), "logged.img")
	if out, err := exec.Command("cp", "--sparse=always", img, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	btrfstest.Unmount(t, dir)
	if logRootOf(t, cp) == 0 {
		t.Fatal("the copy has no log tree")
	}
	return cp
}

// copyFile copies src to a new file in a temporary directory.
func copyFile(t *testing.T, src, name string) string {
	dst := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// kernelView mounts a copy of img (the kernel replays its log) and scans it.
func kernelView(t *testing.T, img string) *btrfstest.Tree {
	k := copyFile(t, img, "kernel.img")
	dir := btrfstest.Mount(t, "", k)
	tr, err := btrfstest.Scan(dir)
	logMust(t, err)
	btrfstest.Unmount(t, dir)
	return tr
}

// TestLogReplayInterop: for each case, the kernel's replay of a copy is the
// oracle; our read-only open shows the same without changing the image;
// our writable open replays it, writes on, and btrfs check and the kernel
// agree; the kernel writes more and check stays clean.
func TestLogReplayInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, c := range logCases() {
		t.Run(c.name, func(t *testing.T) { logReplayCase(t, c) })
	}
}

func logReplayCase(t *testing.T, c logCase) {
	img := makeLogImage(t, c)
	want := kernelView(t, img)

	// The log must matter: the last commit alone differs from the
	// kernel's view.
	last, err := btrfs.Open(img, &btrfs.Options{NoLogReplay: true})
	logMust(t, err)
	if len(btrfstest.Diff(want, ops2Read(t, last), logDiff)) == 0 {
		t.Error("the last commit already shows what the kernel shows: nothing replayed")
	}
	logMust(t, last.Close())

	before := fileSum(t, img)
	ro, err := btrfs.Open(img, nil)
	logMust(t, err)
	diffTrees(t, "read-only open vs kernel", want, ops2Read(t, ro))
	if w := ro.Warnings(); len(w) > 0 {
		t.Errorf("read-only open warns: %q", w)
	}
	logMust(t, ro.Close())
	if fileSum(t, img) != before {
		t.Fatal("read-only open changed the image")
	}

	fsys, err := btrfs.OpenWritable(img, nil)
	logMust(t, err)
	diffTrees(t, "writable open vs kernel", want, ops2Read(t, fsys))
	logMust(t, fsys.WriteFile("ours-after-replay", pattern(20000, 11), 0o644))
	logMust(t, fsys.Mkdir("ours-dir", 0o755))
	ours := ops2Read(t, fsys)
	logMust(t, fsys.Close())
	if logRootOf(t, img) != 0 {
		t.Error("log_root still set after our replay")
	}
	btrfstest.Check(t, []string{img}, true)

	dir := btrfstest.Mount(t, "", img)
	got, err := btrfstest.Scan(dir)
	logMust(t, err)
	diffTrees(t, "kernel after our replay vs our view", ours, got)
	for _, p := range []string{"ours-after-replay", "ours-dir"} {
		if got.Entries[p] == nil {
			t.Errorf("kernel does not see %s", p)
		}
	}
	logMust(t, os.WriteFile(filepath.Join(dir, "kernel-after"), bytes.Repeat([]byte("k"), 70000), 0o644))
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{img}, true)
}

// logFixtureCases are the cases committed as fixtures (testdata/images,
// log-NAME), so that runs without root or a kernel test replay too.
var logFixtureCases = []string{"new-files", "rename-link"}

// TestGenLogFixtures writes the log fixtures into the directory
// GOBTRFS_GEN_LOG_FIXTURES names (testdata/images/gen.sh runs it): each
// log-NAME.img, copied before the commit after its fsyncs, and
// log-NAME.manifest, what the kernel shows after replaying it.
func TestGenLogFixtures(t *testing.T) {
	out := os.Getenv("GOBTRFS_GEN_LOG_FIXTURES")
	if out == "" {
		t.Skip("only run by testdata/images/gen.sh")
	}
	for _, c := range logCases() {
		if !slices.Contains(logFixtureCases, c.name) {
			continue
		}
		c.size = 109 << 20 // the mkfs.btrfs minimum compresses best
		img := makeLogImage(t, c)
		tr := kernelView(t, img)
		name := filepath.Join(out, btrfstest.LogFixturePrefix+c.name)
		if o, err := exec.Command("cp", "--sparse=always", img, name+".img").CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, o)
		}
		logMust(t, tr.Save(name+".manifest"))
	}
}

// TestLogReplayUnwritable: a filesystem with a log that we would not
// write opens read-only with the log ignored and a warning saying so,
// showing the last commit; where we can write it, the open replays as
// usual. OpenWritable never drops the log. Its image has the v1 space
// cache, which was such a filesystem until we learnt to convert it: it
// now takes the replaying branch.
func TestLogReplayUnwritable(t *testing.T) {
	btrfstest.RequireInterop(t)
	c := logCases()[0]
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Extra: []string{"-R", "^free-space-tree"}})
	dir := btrfstest.Mount(t, "commit=300,space_cache=v1", img)
	c.setup(t, dir)
	logMust(t, exec.Command("btrfs", "filesystem", "sync", dir).Run())
	c.ops(t, dir)
	cp := filepath.Join(t.TempDir(), "logged.img")
	if out, err := exec.Command("cp", "--sparse=always", img, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	btrfstest.Unmount(t, dir)
	if logRootOf(t, cp) == 0 {
		t.Fatal("the copy has no log tree")
	}
	want := kernelView(t, cp)
	ro, err := btrfs.Open(cp, nil)
	logMust(t, err)
	got := ops2Read(t, ro)
	warns := ro.Warnings()
	logMust(t, ro.Close())
	w, werr := btrfs.OpenWritable(cp, nil)
	if werr == nil {
		logMust(t, w.Close())
		if len(warns) > 0 {
			t.Errorf("warnings although the log replays: %q", warns)
		}
		diffTrees(t, "read-only open vs kernel", want, got)
		return
	}
	t.Logf("OpenWritable: %v", werr)
	if !errors.Is(werr, btrfs.ErrUnsupported) {
		t.Fatalf("OpenWritable: %v, want ErrUnsupported", werr)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "log tree ignored") {
		t.Fatalf("warnings %q, want one about the ignored log", warns)
	}
	t.Logf("warning: %s", warns[0])
	last, err := btrfs.Open(cp, &btrfs.Options{NoLogReplay: true})
	logMust(t, err)
	diffTrees(t, "read-only open vs the last commit", ops2Read(t, last), got)
	logMust(t, last.Close())
	if logRootOf(t, cp) == 0 {
		t.Fatal("the log is gone")
	}
}

// TestLogReplayMultiDevice: a log on a two-device filesystem (RAID1
// metadata and data) replays read-only over overlays of both devices and
// writable into both.
func TestLogReplayMultiDevice(t *testing.T) {
	btrfstest.RequireInterop(t)
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{DataProfile: "raid1", MetadataProfile: "raid1"})
	dir := btrfstest.Mount(t, "commit=300", devs...)
	c := logCases()[0]
	c.setup(t, dir)
	logMust(t, exec.Command("btrfs", "filesystem", "sync", dir).Run())
	c.ops(t, dir)
	var cps []string
	for i, d := range devs {
		cps = append(cps, copyFile(t, d, fmt.Sprintf("dev%d.img", i)))
	}
	btrfstest.Unmount(t, dir)
	if logRootOf(t, cps[0]) == 0 {
		t.Fatal("the copy has no log tree")
	}
	var kcps []string
	for i, d := range cps {
		kcps = append(kcps, copyFile(t, d, fmt.Sprintf("k%d.img", i)))
	}
	kdir := btrfstest.Mount(t, "", kcps...)
	want, err := btrfstest.Scan(kdir)
	logMust(t, err)
	btrfstest.Unmount(t, kdir)

	before := [2][32]byte{fileSum(t, cps[0]), fileSum(t, cps[1])}
	ro, err := btrfs.Open(cps[0], &btrfs.Options{Devices: cps[1:]})
	logMust(t, err)
	diffTrees(t, "read-only open vs kernel", want, ops2Read(t, ro))
	logMust(t, ro.Close())
	if fileSum(t, cps[0]) != before[0] || fileSum(t, cps[1]) != before[1] {
		t.Fatal("read-only open changed an image")
	}
	fsys, err := btrfs.OpenWritable(cps[0], &btrfs.Options{Devices: cps[1:]})
	logMust(t, err)
	diffTrees(t, "writable open vs kernel", want, ops2Read(t, fsys))
	logMust(t, fsys.WriteFile("ours", pattern(20000, 5), 0o644))
	ours := ops2Read(t, fsys)
	logMust(t, fsys.Close())
	btrfstest.Check(t, cps, true)
	kdir = btrfstest.Mount(t, "", cps...)
	got, err := btrfstest.Scan(kdir)
	logMust(t, err)
	btrfstest.Unmount(t, kdir)
	diffTrees(t, "kernel after our replay vs our view", ours, got)
}
