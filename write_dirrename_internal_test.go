package btrfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestParallelDirRenameBatch: renames of directories run in a parallel
// run (runParallel) beside other changes. A batch is built by holding the
// writer's lock while the changes queue: two moves that would make a loop
// if both ran (x/p into y/q/c, y/q into x/p/d; a hook holds each between
// its checks and its changes until the other is there), a rename of a directory in
// its parent, a move of a directory under itself (EINVAL), a creation in
// another directory, a creation in a directory only the run's move makes
// (after the run), and a chmod through the moved directory (before the
// move or after the run: ENOENT). Only the first move to another parent
// runs in the run; the second runs after it and finds x/p gone. Then
// the old path no longer resolves (the resolved-directories cache forgot
// it), btrfs check and the kernel agree.
func TestParallelDirRenameBatch(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 256 << 20})
	fsys, err := OpenWritable(img, &Options{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for _, d := range []string{"x", "x/p", "x/p/d", "y", "y/q", "y/q/c", "s", "s/a", "u", "u/sub", "e"} {
		if err := fsys.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"x/p/f", "s/a/g", "g"} {
		if err := fsys.WriteFile(f, []byte(f), 0o644); err != nil {
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
	want := map[string]error{}
	// Each move's checks pass before the other moves; both in the run
	// would make a loop (x/p/d/q/c/p). The hook holds each of them
	// between its checks and its changes until both are there, or a
	// while: only one may be there.
	arrived := make(chan struct{}, 2)
	w.renamePlanned = func(oldname, _ string) {
		if oldname != "x/p" && oldname != "y/q" {
			return
		}
		arrived <- struct{}{}
		deadline := time.After(300 * time.Millisecond)
		for len(arrived) < 2 {
			select {
			case <-deadline:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
	defer func() { w.renamePlanned = nil }()
	want["move x/p"] = nil
	queue("move x/p", func() error { return fsys.Rename("x/p", "y/q/c/p") })
	want["move y/q"] = syscall.ENOENT // x/p moved first
	queue("move y/q", func() error { return fsys.Rename("y/q", "x/p/d/q") })
	want["rename s/a"] = nil
	queue("rename s/a", func() error { return fsys.Rename("s/a", "s/a2") })
	want["move u under itself"] = syscall.EINVAL
	queue("move u under itself", func() error { return fsys.Rename("u", "u/sub/u") })
	want["create e/n"] = nil
	queue("create e/n", func() error { return fsys.CreateEmpty("e/n", 0o644) })
	want["create y/q/c/p/n"] = nil
	queue("create y/q/c/p/n", func() error { return fsys.CreateEmpty("y/q/c/p/n", 0o644) })
	queue("chmod x/p/f", func() error { return fsys.Chmod("x/p/f", 0o600) })
	w.mu.Unlock()
	var chmodErr error
	for range queued + 1 {
		r := <-res
		switch r.name {
		case "g":
			if r.err != nil {
				t.Fatal(r.err)
			}
			continue
		case "chmod x/p/f":
			// Before the move, or after the run, where x/p is gone.
			if r.err != nil && !errors.Is(r.err, syscall.ENOENT) {
				t.Errorf("%s: %v", r.name, r.err)
			}
			chmodErr = r.err
			continue
		}
		if !errors.Is(r.err, want[r.name]) || (want[r.name] == nil && r.err != nil) {
			t.Errorf("%s: %v, want %v", r.name, r.err, want[r.name])
		}
	}
	after, _ := fsys.WriteCounters()
	// move x/p and rename s/a ran in the run; move y/q did not (it
	// failed after the run, and would count if it ran in the run and
	// succeeded), nor did the move of u.
	if got := after.ParallelDirRenames - before.ParallelDirRenames; got != 2 {
		t.Errorf("%d renames of directories ran in parallel, want 2", got)
	}
	mode := fs.FileMode(0o644)
	if chmodErr == nil {
		mode = 0o600
	}
	for name, typ := range map[string]fs.FileMode{"y/q/c/p": fs.ModeDir, "y/q/c/p/f": mode, "y/q/c/p/n": 0o644,
		"s/a2/g": 0o644, "u/sub": fs.ModeDir, "e/n": 0o644} {
		fi, err := fsys.Stat(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := fi.Mode() & (fs.ModeDir | fs.ModePerm); got&fs.ModeDir != typ&fs.ModeDir || typ&fs.ModeDir == 0 && got != typ {
			t.Errorf("%s: mode %v, want %v", name, got, typ)
		}
	}
	for _, gone := range []string{"x/p", "s/a", "u/sub/u"} {
		if _, err := fsys.Stat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it gone", gone, err)
		}
	}
	// The writer resolved x/p before the run and cached it; the move
	// dropped it from the cache, so a later change finds it gone.
	for _, probe := range []string{"x/p/probe", "s/a/probe"} {
		if err := fsys.CreateEmpty(probe, 0o644); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("create %s after its directory moved: %v, want ENOENT", probe, err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, true)
	if !btrfstest.Interop() {
		return
	}
	mnt := btrfstest.Mount(t, "ro", img)
	for _, name := range []string{"y/q/c/p/f", "y/q/c/p/n", "s/a2/g", "e/n"} {
		if _, err := os.Lstat(filepath.Join(mnt, name)); err != nil {
			t.Errorf("kernel: %v", err)
		}
	}
}
