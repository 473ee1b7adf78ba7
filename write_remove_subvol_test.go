package btrfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestRemoveSubvolumeRacesCreate: goroutines make directories in an
// empty subvolume while another Removes it, round after round (seeded:
// how many makers, who waits how long). Remove of a subvolume is one
// change, its check that the subvolume is empty and the deletion
// together, as the kernel's rmdir under its inode locks: either it is
// ENOTEMPTY and every directory made is there, or the subvolume is gone
// and every make failed (ENOENT). A subvolume dropped while it held a
// directory is the bug this looks for; the hook widens the window
// between the check and the deletion (when they were two changes, a
// make slipped in there). The image passes btrfs check at the end.
func TestRemoveSubvolumeRacesCreate(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	img := formatTemp(t, 256<<20)
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			fsys.Close()
		}
	})
	var hookDelay time.Duration // set between rounds, read by the hook
	btrfs.SetRmdirSubvolHook(fsys, func() { time.Sleep(hookDelay) })
	rounds := 60
	if longTests() {
		rounds = 600
	}
	var gone, full int
	for round := range rounds {
		if _, err := fsys.CreateSubvolume("sv", nil); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round%3 != 0 {
			// Mostly the subvolume is committed before the race, so
			// Remove deletes it at once; otherwise Remove commits first
			// (a tree made in the running transaction cannot be dropped
			// yet), and checks again after that commit.
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		makers := 1 + rng.IntN(3)
		removerFirst := rng.IntN(2) == 0
		hookDelay = time.Duration(rng.IntN(300)) * time.Microsecond
		waits := make([]time.Duration, makers+1)
		for i := range waits {
			waits[i] = time.Duration(rng.IntN(400)) * time.Microsecond
			if (i == 0) != removerFirst {
				waits[i] += 3 * time.Millisecond // the other side leads
			}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var removeErr error
		makeErrs := make([]error, makers)
		wg.Go(func() {
			<-start
			time.Sleep(waits[0])
			removeErr = fsys.Remove("sv")
		})
		for i := range makers {
			wg.Go(func() {
				<-start
				time.Sleep(waits[i+1])
				makeErrs[i] = fsys.Mkdir(fmt.Sprintf("sv/d%d", i), 0o755)
			})
		}
		close(start)
		wg.Wait()
		made := 0
		for i, err := range makeErrs {
			switch {
			case err == nil:
				made++
			case !errors.Is(err, fs.ErrNotExist):
				t.Fatalf("round %d: mkdir sv/d%d: %v", round, i, err)
			}
		}
		if removeErr == nil {
			gone++
			if made > 0 {
				t.Fatalf("round %d: Remove deleted the subvolume, but %d directories were made in it first", round, made)
			}
			if _, err := fsys.Lstat("sv"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("round %d: sv after Remove: %v", round, err)
			}
			continue
		}
		full++
		if !errors.Is(removeErr, syscall.ENOTEMPTY) || made == 0 {
			t.Fatalf("round %d: Remove: %v with %d directories made", round, removeErr, made)
		}
		for i, err := range makeErrs {
			if _, serr := fsys.Lstat(fmt.Sprintf("sv/d%d", i)); (serr == nil) != (err == nil) {
				t.Fatalf("round %d: sv/d%d made: %v, there: %v", round, i, err, serr)
			}
		}
		if err := fsys.DeleteSubvolume("sv"); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	t.Logf("%d rounds: subvolume removed %d times, ENOTEMPTY %d times", rounds, gone, full)
	if gone == 0 || full == 0 {
		t.Errorf("the race went one way only: removed %d, ENOTEMPTY %d", gone, full)
	}
	closed = true
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
}

// TestRemoveAllSubvolumeNames: RemoveAll of a name that is itself a
// subvolume (changed in the running transaction, so it commits and
// tries again; holding a nested one), itself a snapshot's placeholder,
// an empty read-only snapshot (deleted, as rmdir deletes it) and one
// with entries (EROFS, nothing removed); a refused RemoveAll changes
// nothing, the rest are gone, btrfs check is clean.
func TestRemoveAllSubvolumeNames(t *testing.T) {
	img := formatTemp(t, 256<<20)
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mkSub := func(name string) {
		t.Helper()
		_, err := w.CreateSubvolume(name, nil)
		must(err)
	}
	mkSub("sv")
	must(w.MkdirAll("sv/d/e", 0o755))
	must(w.WriteFile("sv/d/e/f", make([]byte, 50000), 0o644))
	mkSub("sv/d/inner")
	must(w.WriteFile("sv/d/inner/g", []byte("g"), 0o644))
	mkSub("empty")
	must(w.Commit())
	_, err = w.Snapshot("sv", "snap", nil)
	must(err)
	_, err = w.Snapshot("sv", "ro", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	_, err = w.Snapshot("empty", "emptyro", &btrfs.SnapshotOptions{ReadOnly: true})
	must(err)
	must(w.WriteFile("sv/new", []byte("in the running transaction"), 0o644))

	if err := w.RemoveAll("ro"); !errors.Is(err, syscall.EROFS) {
		t.Errorf("RemoveAll(ro): %v, want EROFS", err)
	}
	if _, err := w.Lstat("ro/d/e/f"); err != nil {
		t.Errorf("ro/d/e/f after a refused RemoveAll: %v", err)
	}
	for _, name := range []string{"sv", "snap/d/inner", "emptyro", "ro/d/e"} {
		err := w.RemoveAll(name)
		if name == "ro/d/e" {
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("RemoveAll(%s): %v, want EROFS", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("RemoveAll(%s): %v", name, err)
		}
		if _, err := w.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after RemoveAll: %v", name, err)
		}
	}
	if _, err := w.Lstat("snap/d/e/f"); err != nil {
		t.Errorf("snap/d/e/f after its source went: %v", err)
	}
	subs, err := w.Subvolumes()
	must(err)
	var paths []string
	for _, s := range subs {
		paths = append(paths, s.Path)
	}
	if got := strings.Join(paths, " "); got != "empty snap ro" {
		t.Errorf("subvolumes left: %q, want empty, snap and ro", got)
	}
	must(w.Close())
	btrfstest.Check(t, []string{img}, true)
}
