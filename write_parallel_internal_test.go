package btrfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// waitQueued returns once n changes wait for the combiner.
func waitQueued(w *writer, n int) {
	for {
		w.qmu.Lock()
		q := len(w.queue)
		w.qmu.Unlock()
		if q >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestParallelFileWrites: writes and truncates through open Files of
// different files run in parallel (runParallel), those of one file in
// arrival order; the result equals running them one by one. A batch is
// built by holding the writer's lock while the changes queue, so the
// parallel run is certain, not a matter of timing. Then 16 goroutines
// write, truncate and sync at random (two per file, each in its own half),
// beside readers. btrfs check, our read-only open and the kernel's mount
// equal the model.
func TestParallelFileWrites(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 512 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	const nfiles, half = 8, 256 << 10
	model := make([][]byte, nfiles)
	files := make([]*File, nfiles)
	for i := range nfiles {
		name := fmt.Sprintf("f%d", i)
		model[i] = bytes.Repeat([]byte{byte(i)}, 64<<10)
		if err := fsys.WriteFile(name, model[i], 0o644); err != nil {
			t.Fatal(err)
		}
		if files[i], err = fsys.OpenFile(name); err != nil {
			t.Fatal(err)
		}
		defer files[i].Close()
	}
	if err := fsys.WriteFile("g", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	apply := func(i int, p []byte, off int) {
		if end := off + len(p); end > len(model[i]) {
			model[i] = append(model[i], make([]byte, end-len(model[i]))...)
		}
		copy(model[i][off:], p)
	}

	// One batch, in an order we choose.
	w := fsys.w
	before, _ := fsys.WriteCounters()
	w.mu.Lock()
	errs := make(chan error, 64)
	go func() { _, err := fsys.WriteAt("g", []byte("x"), 0); errs <- err }()
	waitQueued(w, 0)
	time.Sleep(10 * time.Millisecond) // the combiner now waits for the lock
	queued, n := 0, 1
	queue := func(f func() error) {
		go func() { errs <- f() }()
		queued++
		n++
		waitQueued(w, queued)
	}
	rng := rand.New(rand.NewSource(1))
	for round := range 3 {
		for i := range nfiles {
			// Aligned, unaligned (a read of the sector's old bytes), and
			// on file 0 the same range over and over: the last must win.
			off := rng.Intn(96<<10) &^ 4095
			if round == 1 {
				off = rng.Intn(96 << 10)
			}
			if i == 0 {
				off = 4096
			}
			p := bytes.Repeat([]byte{byte(16*round + i + 1)}, 4096+rng.Intn(3)*4096)
			apply(i, p, off)
			f := files[i]
			queue(func() error { _, err := f.WriteAt(p, int64(off)); return err })
		}
	}
	{
		i := 5
		model[i] = model[i][:5000]
		queue(func() error { return files[i].Truncate(5000) })
	}
	w.mu.Unlock()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	after, _ := fsys.WriteCounters()
	if got := after.ParallelChanges - before.ParallelChanges; got != int64(queued) {
		t.Errorf("%d of %d queued changes ran in parallel", got, queued)
	}
	check := func(when string) {
		t.Helper()
		for i := range nfiles {
			b, err := fsys.ReadFile(fmt.Sprintf("f%d", i))
			if err != nil || !bytes.Equal(b, model[i]) {
				t.Fatalf("%s: f%d: %d bytes, want %d (%v)", when, i, len(b), len(model[i]), err)
			}
		}
	}
	check("after the batch")

	// At random: two writers per file, each in its own half, with Syncs,
	// Truncates of the writer's own tail half, and readers beside them.
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	for i := range nfiles {
		if len(model[i]) < 2*half {
			model[i] = append(model[i], make([]byte, 2*half-len(model[i]))...)
		}
		if _, err := files[i].WriteAt(model[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex // guards model
	var wg sync.WaitGroup
	stop := make(chan struct{})
	fail := make(chan error, 64)
	for g := range 2 * nfiles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(g)))
			i, lo := g%nfiles, (g/nfiles)*half
			for range 150 {
				switch r := rng.Intn(20); {
				case r == 0:
					if err := files[i].Sync(); err != nil {
						fail <- err
						return
					}
				case r == 1 && lo > 0:
					// Only the upper half's writer truncates, within its half.
					size := lo + rng.Intn(half)
					mu.Lock()
					err := files[i].Truncate(int64(size))
					if err == nil {
						model[i] = append(model[i][:size:size], make([]byte, 2*half-size)...)
					}
					mu.Unlock()
					if err != nil {
						fail <- err
						return
					}
					// Back to full size so the lower writer's reads of
					// the model stay in range.
					mu.Lock()
					err = files[i].Truncate(2 * half)
					mu.Unlock()
					if err != nil {
						fail <- err
						return
					}
				default:
					n := 1 + rng.Intn(16<<10)
					off := lo + rng.Intn(half-n)
					p := make([]byte, n)
					rng.Read(p)
					if _, err := files[i].WriteAt(p, int64(off)); err != nil {
						fail <- err
						return
					}
					mu.Lock()
					copy(model[i][off:], p)
					mu.Unlock()
				}
			}
		}()
	}
	var rwg sync.WaitGroup
	for r := range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("f%d", (k+r)%nfiles)
				if _, err := fsys.ReadFile(name); err != nil {
					fail <- fmt.Errorf("read %s: %w", name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	check("after the random writers")
	final, _ := fsys.WriteCounters()
	t.Logf("changes %d, in parallel %d", final.Changes, final.ParallelChanges)
	for _, f := range files {
		f.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	ro, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range nfiles {
		if b, err := ro.ReadFile(fmt.Sprintf("f%d", i)); err != nil || !bytes.Equal(b, model[i]) {
			t.Errorf("read-only open: f%d differs (%v)", i, err)
		}
	}
	ro.Close()
	if !btrfstest.Interop() {
		return
	}
	mnt := btrfstest.Mount(t, "ro", img)
	for i := range nfiles {
		if b, err := os.ReadFile(filepath.Join(mnt, fmt.Sprintf("f%d", i))); err != nil || !bytes.Equal(b, model[i]) {
			t.Errorf("kernel: f%d differs (%v)", i, err)
		}
	}
}

// TestParallelCreates: creations by path (mkdir, create, symlink, mknod)
// in different directories run in parallel, those in one directory in
// order, and one whose directory another change of the run makes runs
// after the others; then goroutines create and write beside readers, and
// rename and move directories of their own trees (and try to move one
// under itself: EINVAL). btrfs check and the kernel's mount equal the
// model.
func TestParallelCreates(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 512 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for i := range 4 {
		if err := fsys.Mkdir(fmt.Sprintf("e%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile(fmt.Sprintf("e%d/old", i), bytes.Repeat([]byte{'o'}, 8192), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.WriteFile("g", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{"e1/r1": "r1", "e3/r2": "r2", "e2/target": "t"} {
		if err := fsys.WriteFile(name, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"empty", "full", "gone", "dir"} {
		if err := fsys.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Commit(); err != nil {
		t.Fatal(err)
	}
	w := fsys.w
	before, _ := fsys.WriteCounters()
	w.mu.Lock()
	type result struct {
		name string
		err  error
	}
	res := make(chan result, 64)
	go func() { _, err := fsys.WriteAt("g", []byte("x"), 0); res <- result{"g", err} }()
	waitQueued(w, 0)
	time.Sleep(10 * time.Millisecond)
	queued := 0
	queue := func(name string, f func() error) {
		go func() { res <- result{name, f()} }()
		queued++
		waitQueued(w, queued)
	}
	want := map[string]error{} // what each queued change must return
	for i := range 4 {
		for j := range 3 {
			name := fmt.Sprintf("e%d/f%d", i, j)
			want[name] = nil
			queue(name, func() error { return fsys.CreateEmpty(name, 0o644) })
		}
	}
	want["d0"] = nil
	queue("d0", func() error { return fsys.Mkdir("d0", 0o755) })
	// Its directory is made in this run: it runs after the others.
	want["d0/x"] = nil
	queue("d0/x", func() error { return fsys.CreateEmpty("d0/x", 0o600) })
	want["e1/l"] = nil
	queue("e1/l", func() error { return fsys.Symlink("f0", "e1/l") })
	want["e3/p"] = nil
	queue("e3/p", func() error { return fsys.Mknod("e3/p", fs.ModeNamedPipe|0o644, 0) })
	// Same directory, same name: the second finds the first.
	want["e2/f0 again"] = syscall.EEXIST
	queue("e2/f0 again", func() error { return fsys.CreateEmpty("e2/f0", 0o644) })
	// Changes of one existing inode by path: beside the others, in
	// order with the creations in the same directory (e1) and with each
	// other (e3/old: truncate, then write).
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, f := range map[string]func() error{
		"chmod e0/old":     func() error { return fsys.Chmod("e0/old", 0o600) },
		"setxattr e1":      func() error { return fsys.Setxattr("e1", "user.p", []byte("v")) },
		"chtimes e2/old":   func() error { return fsys.Chtimes("e2/old", mtime, mtime) },
		"truncate e3/old":  func() error { return fsys.Truncate("e3/old", 100) },
		"chown e3/old":     func() error { return fsys.Chown("e3/old", 7, 8) },
		"removexattr e0/x": func() error { return fsys.Removexattr("e0/old", "user.none") },
	} {
		want[name] = nil
		if name == "removexattr e0/x" {
			want[name] = syscall.ENODATA
		}
		queue(name, f)
	}
	want["write e3/old"] = nil
	queue("write e3/old", func() error { _, err := fsys.WriteAt("e3/old", []byte("zz"), 50); return err })
	// A file made in this run: it cannot be resolved before, so this
	// runs after the run.
	want["chmod e0/f1"] = nil
	queue("chmod e0/f1", func() error { return fsys.Chmod("e0/f1", 0o640) })
	// Removals of files: in order with the changes of their directory
	// and of the file (e2/old: chtimes above, then removed, then made
	// again as an empty file); a directory's removal runs alone.
	want["remove e2/old"] = nil
	queue("remove e2/old", func() error { return fsys.Remove("e2/old") })
	want["create e2/old"] = nil
	queue("create e2/old", func() error { return fsys.CreateEmpty("e2/old", 0o600) })
	want["remove e1/l"] = nil
	queue("remove e1/l", func() error { return fsys.Remove("e1/l") })
	want["remove e9"] = syscall.ENOENT
	queue("remove e9", func() error { return fsys.Remove("e9") })
	// Removals of empty directories: beside the others; one that a
	// change of the run fills first is not empty any more.
	want["rmdir empty"] = nil
	queue("rmdir empty", func() error { return fsys.Remove("empty") })
	want["create full/x"] = nil
	queue("create full/x", func() error { return fsys.CreateEmpty("full/x", 0o644) })
	want["rmdir full"] = syscall.ENOTEMPTY
	queue("rmdir full", func() error { return fsys.Remove("full") })
	// Hard links: beside the others, in order with the changes of the
	// inode (e3/old above) and of the new name's directory (e0).
	want["link e3/old e0/hl"] = nil
	queue("link e3/old e0/hl", func() error { return fsys.Link("e3/old", "e0/hl") })
	want["link e0/old e0/hl2"] = nil
	queue("link e0/old e0/hl2", func() error { return fsys.Link("e0/old", "e0/hl2") })
	// Renames of files and directories: beside the others, in order with
	// the changes of both directories and both inodes.
	want["rename e1/r1 e2/target"] = nil
	queue("rename e1/r1 e2/target", func() error { return fsys.Rename("e1/r1", "e2/target") })
	want["rename e3/r2 e3/r2b"] = nil
	queue("rename e3/r2 e3/r2b", func() error { return fsys.Rename("e3/r2", "e3/r2b") })
	want["noreplace e1/old e0/hl"] = syscall.EEXIST // linked above, in e0's chain
	queue("noreplace e1/old e0/hl", func() error { return fsys.RenameNoReplace("e1/old", "e0/hl") })
	want["exchange e0/old e1/old"] = nil
	queue("exchange e0/old e1/old", func() error { return fsys.RenameExchange("e0/old", "e1/old") })
	want["rename dir dir2"] = nil
	queue("rename dir dir2", func() error { return fsys.Rename("dir", "dir2") })
	// A creation in a directory removed before it in the same chain:
	// its path, resolved before the run, leads nowhere when it runs, so
	// it runs after the run (ENOENT there).
	want["rmdir gone"] = nil
	queue("rmdir gone", func() error { return fsys.Remove("gone") })
	want["create gone/x"] = syscall.ENOENT
	queue("create gone/x", func() error { return fsys.CreateEmpty("gone/x", 0o644) })
	w.mu.Unlock()
	for range queued + 1 {
		r := <-res
		if r.name == "g" {
			if r.err != nil {
				t.Fatal(r.err)
			}
			continue
		}
		if !errors.Is(r.err, want[r.name]) || (want[r.name] == nil && r.err != nil) {
			t.Errorf("%s: %v, want %v", r.name, r.err, want[r.name])
		}
	}
	after, _ := fsys.WriteCounters()
	// All but d0/x, chmod e0/f1 and remove e1/l (the symlink is made in
	// the run: run alone) and the six refused ones (a failed change does
	// not count) ran in parallel, the rename of a directory among them.
	if got := after.ParallelChanges - before.ParallelChanges; got != int64(queued-9) {
		t.Errorf("%d of %d queued changes ran in parallel, want %d", got, queued, queued-9)
	}
	if got := after.ParallelDirRenames - before.ParallelDirRenames; got != 1 {
		t.Errorf("%d renames of directories ran in parallel, want 1", got)
	}
	stat := func(name string) *Stat {
		t.Helper()
		fi, err := fsys.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*Stat)
	}
	if st := stat("e2/old"); st.Size != 0 || st.Mode&0o7777 != 0o600 {
		t.Errorf("e2/old after remove and create: size %d mode %o", st.Size, st.Mode)
	}
	if _, err := fsys.Stat("e1/l"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("e1/l after remove: %v", err)
	}
	// e0/old was chmod 600 and linked to e0/hl2, then exchanged with
	// e1/old.
	if st := stat("e1/old"); st.Mode&0o7777 != 0o600 || st.Nlink != 2 {
		t.Errorf("e1/old mode %o, %d links", st.Mode, st.Nlink)
	}
	if st := stat("e0/old"); st.Mode&0o7777 != 0o644 || st.Nlink != 1 {
		t.Errorf("e0/old mode %o, %d links", st.Mode, st.Nlink)
	}
	if b, err := fsys.ReadFile("e2/target"); err != nil || string(b) != "r1" {
		t.Errorf("e2/target after the rename over it: %q %v", b, err)
	}
	for _, gone := range []string{"e1/r1", "e3/r2", "dir"} {
		if _, err := fsys.Stat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after its rename: %v", gone, err)
		}
	}
	stat("e3/r2b")
	if stat("dir2").Mode&syscall.S_IFMT != syscall.S_IFDIR {
		t.Error("dir2 is not a directory")
	}
	if st := stat("e0/f1"); st.Mode&0o7777 != 0o640 {
		t.Errorf("e0/f1 mode %o", st.Mode)
	}
	if st := stat("e3/old"); st.UID != 7 || st.GID != 8 || st.Nlink != 2 {
		t.Errorf("e3/old owner %d:%d, %d links", st.UID, st.GID, st.Nlink)
	}
	if b, err := fsys.ReadFile("e0/hl"); err != nil || len(b) != 100 || string(b[50:52]) != "zz" {
		t.Errorf("e0/hl, a link to e3/old: %d bytes, %v", len(b), err)
	}
	if st := stat("e0/hl2"); st.Nlink != 2 || st.Mode&0o7777 != 0o600 {
		t.Errorf("e0/hl2: %d links, mode %o", st.Nlink, st.Mode)
	}
	if _, err := fsys.Stat("empty"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty after rmdir: %v", err)
	}
	stat("full/x")
	if b, err := fsys.ReadFile("e3/old"); err != nil || len(b) != 100 || string(b[50:52]) != "zz" || b[52] != 'o' {
		t.Errorf("e3/old after truncate and write: %q %v", b, err)
	}
	if v, err := fsys.Getxattr("e1", "user.p"); err != nil || string(v) != "v" {
		t.Errorf("e1 user.p = %q %v", v, err)
	}

	// At random: each goroutine creates in its own directory tree and in
	// one shared directory, and writes what it creates through open
	// Files; readers list directories meanwhile.
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	if err := fsys.Mkdir("shared", 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	model := map[string][]byte{} // files (nil: a directory)
	var wg sync.WaitGroup
	fail := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(g)))
			dirs := []string{fmt.Sprintf("t%d", g), "shared"}
			if err := fsys.Mkdir(dirs[0], 0o755); err != nil {
				fail <- err
				return
			}
			mu.Lock()
			model[dirs[0]] = nil
			mu.Unlock()
			var mine []string  // files this goroutine made
			var empty []string // empty directories it made
			for k := range 120 {
				if len(mine) > 0 && rng.Intn(8) == 0 {
					i := rng.Intn(len(mine))
					victim := mine[i]
					mine = append(mine[:i], mine[i+1:]...)
					if err := fsys.Remove(victim); err != nil {
						fail <- err
						return
					}
					mu.Lock()
					delete(model, victim)
					mu.Unlock()
					continue
				}
				dir := dirs[rng.Intn(len(dirs))]
				name := fmt.Sprintf("%s/g%d-%d", dir, g, k)
				switch r := rng.Intn(10); {
				case r == 0 && len(mine) > 0:
					// A hard link, beside the others' changes.
					src := mine[rng.Intn(len(mine))]
					if err := fsys.Link(src, name); err != nil {
						fail <- err
						return
					}
					mu.Lock()
					model[name] = model[src]
					mu.Unlock()
					mine = append(mine, name)
					continue
				case r == 1 && len(empty) > 0:
					// An empty directory's removal, beside them too.
					i := rng.Intn(len(empty))
					victim := empty[i]
					empty = append(empty[:i], empty[i+1:]...)
					if err := fsys.Remove(victim); err != nil {
						fail <- err
						return
					}
					mu.Lock()
					delete(model, victim)
					mu.Unlock()
					continue
				case r == 4 && len(dirs) > 2 && rng.Intn(2) == 0:
					// A directory of its own tree renamed, to another
					// of its directories maybe, beside the others'
					// changes; or moved under itself: EINVAL.
					src := dirs[2+rng.Intn(len(dirs)-2)]
					parent := dirs[rng.Intn(len(dirs))]
					if parent == "shared" {
						parent = dirs[0]
					}
					dst := fmt.Sprintf("%s/g%d-%d", parent, g, k)
					err := fsys.Rename(src, dst)
					if under := strings.HasPrefix(dst, src+"/"); under {
						if !errors.Is(err, syscall.EINVAL) {
							fail <- fmt.Errorf("rename %s %s: %v, want EINVAL", src, dst, err)
							return
						}
						continue
					}
					if err != nil {
						fail <- err
						return
					}
					moved := func(p string) string {
						if p == src || strings.HasPrefix(p, src+"/") {
							return dst + p[len(src):]
						}
						return p
					}
					for _, l := range [][]string{dirs, mine, empty} {
						for i := range l {
							l[i] = moved(l[i])
						}
					}
					mu.Lock()
					for p, data := range model {
						if q := moved(p); q != p {
							delete(model, p)
							model[q] = data
						}
					}
					mu.Unlock()
					continue
				case r == 3 && len(mine) > 0:
					// A rename of a file, to another directory maybe.
					i := rng.Intn(len(mine))
					src := mine[i]
					if err := fsys.Rename(src, name); err != nil {
						fail <- err
						return
					}
					mu.Lock()
					model[name] = model[src]
					delete(model, src)
					mu.Unlock()
					mine[i] = name
					continue
				case r == 2:
					if err := fsys.Mkdir(name, 0o700); err != nil {
						fail <- err
						return
					}
					mu.Lock()
					model[name] = nil
					mu.Unlock()
					empty = append(empty, name)
					continue
				}
				if rng.Intn(4) == 0 && dir != "shared" {
					if err := fsys.Mkdir(name, 0o755); err != nil {
						fail <- err
						return
					}
					dirs = append(dirs, name)
					mu.Lock()
					model[name] = nil
					mu.Unlock()
					continue
				}
				if err := fsys.CreateEmpty(name, 0o644); err != nil {
					fail <- err
					return
				}
				data := make([]byte, rng.Intn(20000))
				rng.Read(data)
				f, err := fsys.OpenFile(name)
				if err == nil {
					_, err = f.WriteAt(data, 0)
					f.Close()
				}
				if err != nil {
					fail <- err
					return
				}
				mu.Lock()
				model[name] = data
				mu.Unlock()
				mine = append(mine, name)
			}
		}()
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := fsys.ReadDir("shared"); err != nil {
				fail <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	final, _ := fsys.WriteCounters()
	t.Logf("changes %d, in parallel %d, renames of directories among them %d", final.Changes, final.ParallelChanges, final.ParallelDirRenames)
	compare := func(who string, read func(string) ([]byte, error), isDir func(string) bool) {
		t.Helper()
		for name, data := range model {
			if data == nil {
				if !isDir(name) {
					t.Errorf("%s: %s is not a directory", who, name)
				}
				continue
			}
			if b, err := read(name); err != nil || !bytes.Equal(b, data) {
				t.Errorf("%s: %s differs (%v)", who, name, err)
			}
		}
	}
	compare("ours", fsys.ReadFile, func(n string) bool { st, err := fs.Stat(fsys, n); return err == nil && st.IsDir() })
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	if !btrfstest.Interop() {
		return
	}
	mnt := btrfstest.Mount(t, "ro", img)
	compare("kernel", func(n string) ([]byte, error) { return os.ReadFile(filepath.Join(mnt, n)) },
		func(n string) bool { st, err := os.Stat(filepath.Join(mnt, n)); return err == nil && st.IsDir() })
	// Nothing removed is left: every file under the goroutines' trees
	// is in the model.
	for _, top := range []string{"shared", "t0", "t3", "t7"} {
		err := filepath.WalkDir(filepath.Join(mnt, top), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(mnt, p)
			if _, ok := model[rel]; !ok && !d.IsDir() {
				t.Errorf("kernel: %s was removed", rel)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	for _, n := range []string{"d0/x", "e2/old", "e3/p", "e0/f2"} {
		if _, err := os.Lstat(filepath.Join(mnt, n)); err != nil {
			t.Errorf("kernel: %v", err)
		}
	}
}

// TestLoneChangesDoNotYield: changes made one at a time, never meeting a
// combiner at work (a FUSE mount under tar), do not yield before their
// batch; a change that finds a combiner at work is noted, and lone changes
// after it yield for the changes on their way.
func TestLoneChangesDoNotYield(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	w := fsys.w
	yields := func() int64 {
		w.qmu.Lock()
		defer w.qmu.Unlock()
		return w.yields
	}
	for i := range 50 {
		name := fmt.Sprintf("f%d", i)
		if err := fsys.WriteFile(name, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Chmod(name, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n := yields(); n != 0 {
		t.Fatalf("%d yields of 100 changes made one at a time", n)
	}
	// A combiner held at the lock; a second change finds it at work.
	w.mu.Lock()
	errs := make(chan error, 2)
	go func() { errs <- fsys.Chmod("f0", 0o644) }()
	for {
		w.qmu.Lock()
		busy := w.combining && len(w.queue) == 0 // the batch is taken
		w.qmu.Unlock()
		if busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	go func() { errs <- fsys.Chmod("f1", 0o644) }()
	waitQueued(w, 1)
	w.mu.Unlock()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	w.qmu.Lock()
	noted := w.lastCompany != 0
	w.lastCompany = time.Now().UnixNano() // as if just now, whatever the machine's speed
	w.qmu.Unlock()
	if !noted {
		t.Fatal("a change that found a combiner at work was not noted")
	}
	if err := fsys.Chmod("f2", 0o644); err != nil {
		t.Fatal(err)
	}
	if n := yields(); n != 1 {
		t.Fatalf("%d yields of a lone change right after one met a combiner, want 1", n)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
}
