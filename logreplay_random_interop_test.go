//go:build linux

package btrfs_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestLogReplayRandom: random operations with random fsyncs on a kernel
// mount (commit=300), the image copied before the next commit; the
// kernel's replay of a copy is the oracle for our read-only and writable
// opens, and what we write after the replay must pass btrfs check and
// mount. A few seeds in CI, more with GOBTRFS_LONG=1.
func TestLogReplayRandom(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	runs := 3
	if os.Getenv("GOBTRFS_LONG") == "1" {
		runs = 30
	}
	logged := 0
	for i := range runs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			if logRandomRun(t, rng) {
				logged++
			}
		})
	}
	t.Logf("%d of %d runs left a log", logged, runs)
	if logged == 0 {
		t.Error("no run left a log tree")
	}
}

// randFS tracks the paths of the random run.
type randFS struct {
	rng   *rand.Rand
	root  string
	files []string // relative paths of regular files
	dirs  []string // relative paths of directories ("" is the top)
	n     int
}

func (r *randFS) abs(p string) string { return filepath.Join(r.root, p) }

func (r *randFS) newName(dir string) string {
	r.n++
	return filepath.Join(dir, fmt.Sprintf("n%d", r.n))
}

func (r *randFS) pick(xs []string) string { return xs[r.rng.IntN(len(xs))] }

// op runs one random operation; it reports what it did.
func (r *randFS) op(t *testing.T) string {
	rng := r.rng
	switch k := rng.IntN(100); {
	case k < 20 || len(r.files) == 0:
		p := r.newName(r.pick(r.dirs))
		data := pattern(rng.IntN(3)*rng.IntN(70000)+rng.IntN(3000), byte(rng.IntN(256)))
		logMust(t, os.WriteFile(r.abs(p), data, 0o644))
		r.files = append(r.files, p)
		return "create " + p
	case k < 35:
		p := r.pick(r.files)
		f, err := os.OpenFile(r.abs(p), os.O_RDWR, 0)
		logMust(t, err)
		st, _ := f.Stat()
		off := int64(0)
		if st.Size() > 0 {
			off = rng.Int64N(st.Size() + 1)
		}
		_, err = f.WriteAt(pattern(1+rng.IntN(40000), byte(rng.IntN(256))), off)
		logMust(t, err)
		f.Close()
		return "write " + p
	case k < 40:
		p := r.pick(r.files)
		st, err := os.Stat(r.abs(p))
		logMust(t, err)
		logMust(t, os.Truncate(r.abs(p), rng.Int64N(st.Size()+5000)))
		return "truncate " + p
	case k < 50:
		i := rng.IntN(len(r.files))
		p := r.files[i]
		q := r.newName(r.pick(r.dirs))
		logMust(t, os.Rename(r.abs(p), r.abs(q)))
		r.files[i] = q
		return "rename " + p + " " + q
	case k < 57:
		p := r.pick(r.files)
		q := r.newName(r.pick(r.dirs))
		logMust(t, os.Link(r.abs(p), r.abs(q)))
		r.files = append(r.files, q)
		return "link " + p + " " + q
	case k < 67:
		i := rng.IntN(len(r.files))
		p := r.files[i]
		logMust(t, os.Remove(r.abs(p)))
		r.files = slices.Delete(r.files, i, i+1)
		return "unlink " + p
	case k < 75:
		p := r.newName(r.pick(r.dirs))
		logMust(t, os.Mkdir(r.abs(p), 0o755))
		r.dirs = append(r.dirs, p)
		return "mkdir " + p
	case k < 78:
		// rmdir of an empty directory, if there is one.
		for i, d := range r.dirs {
			if d == "" {
				continue
			}
			if ents, _ := os.ReadDir(r.abs(d)); len(ents) == 0 {
				logMust(t, os.Remove(r.abs(d)))
				r.dirs = slices.Delete(r.dirs, i, i+1)
				return "rmdir " + d
			}
		}
		return "no rmdir"
	case k < 86:
		p := r.pick(r.files)
		name := fmt.Sprintf("user.x%d", rng.IntN(4))
		if rng.IntN(3) == 0 {
			unix.Removexattr(r.abs(p), name) // may not exist
			return "removexattr " + p
		}
		logMust(t, unix.Setxattr(r.abs(p), name, pattern(rng.IntN(200), 1), 0))
		return "setxattr " + p
	case k < 89:
		p := r.pick(r.files)
		f, err := os.OpenFile(r.abs(p), os.O_RDWR, 0)
		logMust(t, err)
		defer f.Close()
		off, n := rng.Int64N(200000)&^4095, 4096*(1+rng.Int64N(16))
		if rng.IntN(2) == 0 {
			logMust(t, unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE*uint32(rng.IntN(2)), off, n))
			return "fallocate " + p
		}
		logMust(t, unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n))
		return "punch " + p
	case k < 91:
		p := r.newName(r.pick(r.dirs))
		logMust(t, os.Symlink("some/target", r.abs(p)))
		return "symlink " + p
	case k < 96:
		p := r.pick(r.files)
		fsyncPath(t, r.abs(p))
		return "fsync " + p
	default:
		d := r.pick(r.dirs)
		fsyncPath(t, r.abs(d))
		return "fsync dir " + d
	}
}

// logRandomRun runs one random scenario; it reports whether the copy had a
// log (without one there is nothing to replay and the run only checks
// that nothing breaks).
func logRandomRun(t *testing.T, rng *rand.Rand) bool {
	opts := btrfstest.MkfsOptions{}
	mount := "commit=300"
	if rng.IntN(3) == 0 {
		opts.NodeSize = 4096
	}
	if rng.IntN(3) == 0 {
		mount += ",compress=zstd"
	}
	img := btrfstest.Mkfs(t, opts)
	dir := btrfstest.Mount(t, mount, img)
	r := &randFS{rng: rng, root: dir, dirs: []string{""}}
	var did []string
	for range 30 {
		did = append(did, r.op(t))
	}
	logMust(t, exec.Command("btrfs", "filesystem", "sync", dir).Run())
	for range 10 + rng.IntN(60) {
		did = append(did, r.op(t))
	}
	// End with an fsync, so there is something to log.
	fsyncPath(t, r.abs(r.pick(r.files)))
	cp := filepath.Join(t.TempDir(), "logged.img")
	if out, err := exec.Command("cp", "--sparse=always", img, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	btrfstest.Unmount(t, dir)
	hasLog := logRootOf(t, cp) != 0
	orig := copyFile(t, cp, "orig.img")
	defer func() {
		if t.Failed() {
			t.Logf("operations after the commit: %q", did[30:])
			if keep := os.Getenv("GOBTRFS_KEEP_LOG_IMAGE"); keep != "" {
				exec.Command("cp", "--sparse=always", orig, keep).Run()
			}
		}
	}()
	want := kernelView(t, cp)
	ro, err := btrfs.Open(cp, nil)
	logMust(t, err)
	diffTrees(t, "read-only open vs kernel", want, ops2Read(t, ro))
	if w := ro.Warnings(); len(w) > 0 {
		t.Errorf("warnings: %q", w)
	}
	logMust(t, ro.Close())
	fsys, err := btrfs.OpenWritable(cp, nil)
	logMust(t, err)
	diffTrees(t, "writable open vs kernel", want, ops2Read(t, fsys))
	logMust(t, fsys.WriteFile("ours", pattern(12345, 9), 0o644))
	if len(r.files) > 0 {
		logMust(t, fsys.WriteFile(r.files[0], pattern(5000, 10), 0o644))
	}
	ours := ops2Read(t, fsys)
	logMust(t, fsys.Close())
	btrfstest.Check(t, []string{cp}, true)
	kdir := btrfstest.Mount(t, "", cp)
	got, err := btrfstest.Scan(kdir)
	logMust(t, err)
	diffTrees(t, "kernel after our changes vs our view", ours, got)
	logMust(t, os.WriteFile(filepath.Join(kdir, "kernel"), pattern(70000, 11), 0o644))
	btrfstest.Unmount(t, kdir)
	btrfstest.Check(t, []string{cp}, true)
	return hasLog
}
