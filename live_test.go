package btrfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
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
// on one writable FS at once (run it with -race). Each writer owns a
// directory and keeps a model of it; readers check that whatever they see
// is one whole version of a file, never half a change. At the end the
// model equals what our read side, btrfs check and the kernel's mount see.
func TestLiveConcurrent(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{CommitInterval: 50 * time.Millisecond, DirtyLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const writers, readers, opsPerWriter = 4, 4, 150
	models := make([]map[string]int, writers) // path -> version; -1 a directory
	var mu sync.Mutex                         // guards names
	var names []string                        // every file path ever made
	for i := range writers {
		if err := fsys.Mkdir(fmt.Sprintf("w%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
		models[i] = map[string]int{fmt.Sprintf("w%d", i): -1}
	}
	var done atomic.Bool
	var wg, rg sync.WaitGroup
	errc := make(chan error, writers+readers+1)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			m := models[i]
			dir := fmt.Sprintf("w%d", i)
			for op := range opsPerWriter {
				name := fmt.Sprintf("%s/f%d", dir, rng.IntN(12))
				if rng.IntN(3) == 0 {
					name = fmt.Sprintf("%s/d%d/f%d", dir, rng.IntN(3), rng.IntN(4))
					d := filepath.Dir(name)
					if _, ok := m[d]; !ok {
						if err := fsys.Mkdir(d, 0o755); err != nil {
							errc <- err
							return
						}
						m[d] = -1
					}
				}
				var err error
				switch r := rng.IntN(10); {
				case r < 6:
					ver := op + 1
					err = fsys.WriteFile(name, liveContent(name, ver), 0o644)
					if err == nil {
						if _, ok := m[name]; !ok {
							mu.Lock()
							names = append(names, name)
							mu.Unlock()
						}
						m[name] = ver
					}
				case r < 8:
					if _, ok := m[name]; ok {
						err = fsys.Remove(name)
						delete(m, name)
					}
				case r < 9:
					err = fsys.Sync()
				default:
					err = fsys.Commit()
				}
				if err != nil {
					errc <- fmt.Errorf("writer %d op %d: %w", i, op, err)
					return
				}
			}
		}()
	}
	for r := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(100+r)))
			type openFile struct {
				name string
				f    *btrfs.File
			}
			var held []openFile // files kept open across changes
			for !done.Load() {
				mu.Lock()
				if len(names) == 0 {
					mu.Unlock()
					time.Sleep(time.Millisecond)
					continue
				}
				name := names[rng.IntN(len(names))]
				mu.Unlock()
				switch rng.IntN(4) {
				case 0:
					b, err := fsys.ReadFile(name)
					if errors.Is(err, fs.ErrNotExist) {
						continue
					}
					if err == nil {
						err = checkLiveContent(name, b)
					}
					if err != nil {
						errc <- fmt.Errorf("reader %d: %w", r, err)
						return
					}
				case 1:
					ents, err := fsys.ReadDir(filepath.Dir(name))
					if errors.Is(err, fs.ErrNotExist) {
						continue
					}
					if err != nil {
						errc <- fmt.Errorf("reader %d: readdir: %w", r, err)
						return
					}
					for _, e := range ents {
						if !strings.HasPrefix(e.Name(), "f") && !strings.HasPrefix(e.Name(), "d") {
							errc <- fmt.Errorf("reader %d: entry %q in %s", r, e.Name(), filepath.Dir(name))
							return
						}
					}
				case 2:
					f, err := fsys.OpenFile(name)
					if err == nil {
						held = append(held, openFile{name, f})
					}
				default:
					if len(held) == 0 {
						continue
					}
					h := held[rng.IntN(len(held))]
					// One ReadAt holds the read lock throughout, so with a
					// buffer larger than any version it reads one whole
					// version of whatever the file holds now.
					buf := make([]byte, 64<<10)
					n, err := h.f.ReadAt(buf, 0)
					if errors.Is(err, fs.ErrNotExist) {
						continue
					}
					if err != nil && err != io.EOF {
						errc <- fmt.Errorf("reader %d: read of an open file: %w", r, err)
						return
					}
					if n > 0 {
						if err := checkLiveContent(h.name, buf[:n]); err != nil {
							errc <- fmt.Errorf("reader %d: open file: %w", r, err)
							return
						}
					}
				}
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
	if t.Failed() {
		fsys.Close()
		return
	}
	if err := fsys.Close(); err != nil { // commits what is left
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)

	want := map[string]int{}
	for _, m := range models {
		for k, v := range m {
			want[k] = v
		}
	}
	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	compareLive(t, "our read side", want, func(name string) ([]byte, error) { return ro.ReadFile(name) },
		func(name string) ([]string, error) {
			ents, err := ro.ReadDir(name)
			out := make([]string, len(ents))
			for i, e := range ents {
				out[i] = e.Name()
			}
			return out, err
		})
	ro.Close()

	dir := btrfstest.Mount(t, "ro", img)
	compareLive(t, "the kernel", want, func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) },
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
