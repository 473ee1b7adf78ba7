package btrfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// liveContent is what the live test writes: the file's path and a version,
// repeated to a length the version decides, so that a reader can tell a
// whole version of a file from a torn or mixed one by the bytes alone.
func liveContent(name string, ver int) []byte {
	line := fmt.Sprintf("%s v%d\n", name, ver)
	n := (ver*7919)%20000 + 1
	return bytes.Repeat([]byte(line), n/len(line)+1)
}

// checkLiveContent reports whether b is liveContent(name, v) for some v.
func checkLiveContent(name string, b []byte) error {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return fmt.Errorf("%s: %d bytes without a line", name, len(b))
	}
	var ver int
	if _, err := fmt.Sscanf(string(b[:i]), name+" v%d", &ver); err != nil {
		return fmt.Errorf("%s: first line %q: %v", name, b[:i], err)
	}
	if want := liveContent(name, ver); !bytes.Equal(b, want) {
		return fmt.Errorf("%s: %d bytes are not version %d (%d bytes): torn or mixed", name, len(b), ver, len(want))
	}
	return nil
}

// TestLiveConcurrent runs writers, readers, open files, Syncs and commits
// on one writable FS at once (run it with -race), in phases. Each writer
// owns a directory and its own names in a shared directory, moves files
// between the two, and keeps a model; readers check that whatever they
// see is one whole version of a file, never half a change. After each
// phase a commit, then btrfs check --check-data-csum and the kernel's
// mount equal the model, and the next phase goes on over the same FS.
func TestLiveConcurrent(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: 50 * time.Millisecond, DirtyLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	const writers, readers, phases, opsPerPhase = 4, 4, 3, 80
	models := make([]map[string]int, writers) // path -> version; -1 a directory
	if err := fsys.Mkdir("shared", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range writers {
		if err := fsys.Mkdir(fmt.Sprintf("w%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
		models[i] = map[string]int{fmt.Sprintf("w%d", i): -1}
	}
	names := &liveNames{}
	for phase := range phases {
		runLivePhase(t, fsys, seed, phase, models, names, readers, opsPerPhase)
		if t.Failed() {
			return
		}
		if err := fsys.Commit(); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"shared": -1}
		for _, m := range models {
			maps.Copy(want, m)
		}
		btrfstest.Check(t, []string{img}, true)
		compareLive(t, fmt.Sprintf("phase %d: our writable FS", phase), want, fsys.ReadFile, listNames(fsys))
		dir := btrfstest.Mount(t, "ro", img)
		compareLive(t, fmt.Sprintf("phase %d: the kernel", phase), want,
			func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) },
			func(name string) ([]string, error) {
				ents, err := os.ReadDir(filepath.Join(dir, name))
				out := make([]string, len(ents))
				for i, e := range ents {
					out[i] = e.Name()
				}
				return out, err
			})
		btrfstest.Unmount(t, dir)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
}

// liveNames is every file path the live test made, for readers to pick.
type liveNames struct {
	mu    sync.Mutex
	names []string
}

func (n *liveNames) add(name string) {
	n.mu.Lock()
	n.names = append(n.names, name)
	n.mu.Unlock()
}

func (n *liveNames) pick(rng *rand.Rand) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.names) == 0 {
		return "", false
	}
	return n.names[rng.IntN(len(n.names))], true
}

func listNames(fsys *btrfs.FS) func(string) ([]string, error) {
	return func(name string) ([]string, error) {
		ents, err := fsys.ReadDir(name)
		out := make([]string, len(ents))
		for i, e := range ents {
			out[i] = e.Name()
		}
		return out, err
	}
}

// runLivePhase runs one phase of TestLiveConcurrent: the writers' ops and,
// beside them until they finish, the readers.
func runLivePhase(t *testing.T, fsys *btrfs.FS, seed uint64, phase int, models []map[string]int, names *liveNames, readers, ops int) {
	var done atomic.Bool
	var wg, rg sync.WaitGroup
	errc := make(chan error, len(models)+readers)
	for i, m := range models {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := liveWriter(fsys, rand.New(rand.NewPCG(seed, uint64(phase*1000+i))), i, m, names, ops); err != nil {
				errc <- fmt.Errorf("phase %d writer %d: %w", phase, i, err)
			}
		}()
	}
	for r := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			if err := liveReader(fsys, rand.New(rand.NewPCG(seed, uint64(phase*1000+100+r))), names, &done); err != nil {
				errc <- fmt.Errorf("phase %d reader %d: %w", phase, r, err)
			}
		}()
	}
	wg.Wait()
	done.Store(true)
	rg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// liveWriter does ops random changes in writer i's directory and under its
// own names in the shared directory, keeping m in step.
func liveWriter(fsys *btrfs.FS, rng *rand.Rand, i int, m map[string]int, names *liveNames, ops int) error {
	dir := fmt.Sprintf("w%d", i)
	pick := func() string {
		switch rng.IntN(4) {
		case 0:
			return fmt.Sprintf("shared/s%d_f%d", i, rng.IntN(6))
		case 1:
			return fmt.Sprintf("%s/d%d/f%d", dir, rng.IntN(3), rng.IntN(4))
		}
		return fmt.Sprintf("%s/f%d", dir, rng.IntN(12))
	}
	for op := range ops {
		name := pick()
		if d := filepath.Dir(name); d != "shared" {
			if _, ok := m[d]; !ok {
				if err := fsys.Mkdir(d, 0o755); err != nil {
					return err
				}
				m[d] = -1
			}
		}
		var err error
		switch r := rng.IntN(12); {
		case r < 6:
			ver := rng.IntN(1 << 20)
			// A file's content names its path, so a rename rewrites it.
			err = fsys.WriteFile(name, liveContent(name, ver), 0o644)
			if err == nil {
				if _, ok := m[name]; !ok {
					names.add(name)
				}
				m[name] = ver
			}
		case r < 8:
			if _, ok := m[name]; ok {
				err = fsys.Remove(name)
				delete(m, name)
			}
		case r < 10:
			// Move a file between the writer's directory and the shared
			// one, replacing what is there; then rewrite it so its
			// content names its new path.
			to := pick()
			if v, ok := m[name]; ok && v >= 0 && to != name {
				if tv, ok := m[to]; ok && tv < 0 {
					continue
				}
				if d := filepath.Dir(to); d != "shared" {
					if _, ok := m[d]; !ok {
						continue
					}
				}
				if err = fsys.Rename(name, to); err == nil {
					delete(m, name)
					ver := rng.IntN(1 << 20)
					if err = fsys.WriteFile(to, liveContent(to, ver), 0o644); err == nil {
						if _, ok := m[to]; !ok {
							names.add(to)
						}
						m[to] = ver
					}
				}
			}
		case r < 11:
			err = fsys.Sync()
		default:
			err = fsys.Commit()
		}
		if err != nil {
			return fmt.Errorf("op %d on %s: %w", op, name, err)
		}
	}
	return nil
}

// liveReader reads until done: whole files, directories, and files it
// keeps open across changes and commits. Between a Rename and the rewrite
// after it a file's content names its old path, so a content is accepted
// when it names any path.
func liveReader(fsys *btrfs.FS, rng *rand.Rand, names *liveNames, done *atomic.Bool) error {
	var held []*btrfs.File // files kept open across changes
	buf := make([]byte, 64<<10)
	for !done.Load() {
		name, ok := names.pick(rng)
		if !ok {
			time.Sleep(time.Millisecond)
			continue
		}
		switch rng.IntN(4) {
		case 0:
			b, err := fsys.ReadFile(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil {
				err = checkAnyLiveContent(b)
			}
			if err != nil {
				return err
			}
		case 1:
			ents, err := fsys.ReadDir(filepath.Dir(name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("readdir: %w", err)
			}
			for _, e := range ents {
				if n := e.Name(); !strings.HasPrefix(n, "f") && !strings.HasPrefix(n, "d") && !strings.HasPrefix(n, "s") {
					return fmt.Errorf("entry %q in %s", n, filepath.Dir(name))
				}
			}
		case 2:
			if f, err := fsys.OpenFile(name); err == nil {
				held = append(held, f)
			}
		default:
			if len(held) == 0 {
				continue
			}
			// One ReadAt holds the read lock throughout, so with a
			// buffer larger than any version it reads one whole version
			// of whatever the file holds now.
			n, err := held[rng.IntN(len(held))].ReadAt(buf, 0)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil && err != io.EOF {
				return fmt.Errorf("read of an open file: %w", err)
			}
			if n > 0 {
				if err := checkAnyLiveContent(buf[:n]); err != nil {
					return fmt.Errorf("open file: %w", err)
				}
			}
		}
	}
	return nil
}

// checkAnyLiveContent is checkLiveContent for whatever path b names.
func checkAnyLiveContent(b []byte) error {
	i := bytes.IndexByte(b, '\n')
	j := bytes.LastIndex(b[:max(i, 0)], []byte(" v"))
	if i < 0 || j < 0 {
		return fmt.Errorf("%d bytes without a version line", len(b))
	}
	return checkLiveContent(string(b[:j]), b)
}

// compareLive checks a view of the filesystem against the live test's model.
func compareLive(t *testing.T, who string, want map[string]int, read func(string) ([]byte, error), list func(string) ([]string, error)) {
	t.Helper()
	children := map[string][]string{}
	for name := range want {
		children[filepath.Dir(name)] = append(children[filepath.Dir(name)], filepath.Base(name))
	}
	for name, ver := range want {
		if ver < 0 {
			got, err := list(name)
			if err != nil {
				t.Errorf("%s: %s: %v", who, name, err)
				continue
			}
			if len(got) != len(children[name]) {
				t.Errorf("%s: %s has %d entries %v, want %d %v", who, name, len(got), got, len(children[name]), children[name])
			}
			continue
		}
		b, err := read(name)
		if err != nil {
			t.Errorf("%s: %s: %v", who, name, err)
			continue
		}
		if !bytes.Equal(b, liveContent(name, ver)) {
			t.Errorf("%s: %s: %d bytes, want version %d", who, name, len(b), ver)
		}
	}
}

// TestOpenFileNumberNotReused: a file removed while open, and a new file
// made after a commit, must not share an inode number, or the open File
// (which reloads its inode by number after changes) reads the new file.
func TestOpenFileNumberNotReused(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if err := fsys.WriteFile("old", []byte("old file"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile("old")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fsys.Remove("old"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile("new", []byte("new file"), 0o644); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read of the removed file: %q, %v; want %v", buf[:n], err, fs.ErrNotExist)
	}
}

// TestDirIndexNotReused: an entry removed in one commit leaves its
// DIR_INDEX unused by the next entry of the directory, made after the
// commit: the counter carries over as the kernel's in-memory one does,
// so a directory listing read across the commit (its offsets are
// DIR_INDEX offsets) neither skips the new entry nor shows it twice.
func TestDirIndexNotReused(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return fsys.Mkdir("d", 0o755) },
		func() error { return fsys.WriteFile("d/a", nil, 0o644) },
		func() error { return fsys.WriteFile("d/b", nil, 0o644) },
		fsys.Commit,
		func() error { return fsys.Remove("d/b") },
		fsys.Commit,
		func() error { return fsys.WriteFile("d/c", nil, 0o644) },
		fsys.Close,
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "5", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree: %v\n%s", err, out)
	}
	// item N key (257 DIR_INDEX 4) ... then, a few lines on, "name: c".
	index := map[string]string{}
	last := ""
	for _, line := range strings.Split(string(out), "\n") {
		item := strings.HasPrefix(strings.TrimSpace(line), "item ")
		if i := strings.Index(line, "DIR_INDEX "); i >= 0 && item {
			last = strings.TrimSuffix(strings.Fields(line[i+len("DIR_INDEX "):])[0], ")")
		} else if name, ok := strings.CutPrefix(strings.TrimSpace(line), "name: "); ok && last != "" {
			index[name] = last
			last = ""
		} else if item {
			last = ""
		}
	}
	if index["a"] != "2" || index["c"] != "4" {
		t.Errorf("DIR_INDEX offsets %v, want a at 2 and c at 4 (3 was b's, removed)", index)
	}
	btrfstest.Check(t, []string{img}, false)
}
