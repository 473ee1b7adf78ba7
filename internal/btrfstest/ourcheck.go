package btrfstest

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// OurCheckEnv names the environment variable that controls whether Check
// runs our own checker (`gobtrfs check`) beside btrfs check on every
// image: it does unless the variable is "off" (or "0"). With it on, every
// package's tests passed (2026-12-04) but for one ENOSPC test failing
// without it too; each check adds tens of milliseconds (the binary is
// built once per test process, without -race).
const OurCheckEnv = "GOBTRFS_CHECK_OURS"

// staleFreeSpaceInfo is the one problem every image made by mkfs.btrfs
// before 6.19 has (free-space info of the block groups it removed): btrfs
// check 6.19 reports it, the installed 6.2 does not, so neither do we here.
const staleFreeSpaceInfo = "has no corresponding block group"

var ourCheck struct {
	once sync.Once
	path string
	err  error
}

// ourCheckBinary builds cmd/gobtrfs once per test process into the
// fixture cache directory (or the system temporary directory) and returns
// its path. The check runs as a separate program so this harness does not
// import the checker the check package's own tests use it beside.
func ourCheckBinary(tb testing.TB) string {
	tb.Helper()
	ourCheck.once.Do(func() {
		dir, err := fixtureCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			ourCheck.err = err
			return
		}
		tmp, err := os.CreateTemp(dir, "gobtrfs-*.tmp")
		if err != nil {
			ourCheck.err = err
			return
		}
		tmp.Close()
		cmd := exec.Command("go", "build", "-o", tmp.Name(), "./cmd/gobtrfs")
		cmd.Dir = ModuleRoot(tb)
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp.Name())
			ourCheck.err = fmt.Errorf("go build ./cmd/gobtrfs: %v\n%s", err, out)
			return
		}
		// Named by its contents: processes testing the same code share
		// one file, and a process testing other code (another checkout
		// or worktree) never replaces the binary this one runs. Copies
		// unused for a day are removed.
		ourCheck.path, ourCheck.err = keepByHash(dir, tmp.Name())
	})
	if ourCheck.err != nil {
		tb.Fatalf("building gobtrfs for %s: %v", OurCheckEnv, ourCheck.err)
	}
	return ourCheck.path
}

// checkOurs runs `gobtrfs check` on devs unless OurCheckEnv turns it off,
// and fails the test with the problems it finds (btrfs check has already
// called the filesystem clean, so every one is a false alarm or a problem
// btrfs-progs misses).
func checkOurs(tb testing.TB, devs []string, dataCsum, force, writeHole bool) {
	tb.Helper()
	if v := os.Getenv(OurCheckEnv); !force && (v == "off" || v == "0") {
		return
	}
	args := []string{"check", "--json"}
	if dataCsum {
		args = append(args, "--check-data-csum")
	}
	for _, d := range devs[1:] {
		args = append(args, "-d", d)
	}
	args = append(args, devs[0])
	out, err := exec.Command(ourCheckBinary(tb), args...).Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		stderr := ""
		if ee != nil {
			stderr = string(ee.Stderr)
		}
		tb.Fatalf("gobtrfs check %s: %v\n%s", strings.Join(devs, " "), err, stderr)
	}
	var rep struct {
		Problems []struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		tb.Fatalf("gobtrfs check --json: %v\n%s", err, out)
	}
	var bad []string
	for _, p := range rep.Problems {
		if p.Kind == "free_space" && strings.Contains(p.Message, staleFreeSpaceInfo) {
			continue
		}
		if writeHole && p.Kind == "data_csum" && (strings.Contains(p.Message, "rebuilt from P") || strings.Contains(p.Message, ": Q on devid")) {
			tb.Logf("RAID5/6 write hole after the power loss (btrfs scrub would repair): %s", p.Message)
			continue
		}
		bad = append(bad, p.Kind+": "+p.Message)
	}
	if len(bad) > 0 {
		tb.Fatalf("gobtrfs check finds problems btrfs check does not:\n%s", strings.Join(bad, "\n"))
	}
}

// keepByHash renames the file at tmp into dir as gobtrfs-check-HASH (HASH
// from its contents), or removes it when that file exists, and removes
// other gobtrfs-check-* files not touched for a day.
func keepByHash(dir, tmp string) (string, error) {
	f, err := os.Open(tmp)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("gobtrfs-check-%x", h.Sum(nil)[:8]))
	now := time.Now()
	if _, err := os.Stat(path); err == nil {
		os.Remove(tmp)
		os.Chtimes(path, now, now) // kept from the pruning below
	} else if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "gobtrfs-check*"))
	for _, o := range old {
		if fi, err := os.Stat(o); err == nil && o != path && now.Sub(fi.ModTime()) > 24*time.Hour {
			os.Remove(o)
		}
	}
	return path, nil
}
