//go:build linux

package cli

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// mainEnv makes the test binary the gobtrfs command (TestMain), so tests
// can run it as its own process: a mount must not be served by the
// process that uses it, and --background starts the command again.
const mainEnv = "GOBTRFS_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// gobtrfsCmd is the command line `gobtrfs args...` as a process.
func gobtrfsCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	return cmd
}

// requireMount skips without FUSE or the kernel interop environment, or
// fails under GOBTRFS_INTEROP=1.
func requireMount(t *testing.T) {
	t.Helper()
	btrfstest.RequireInterop(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv(btrfstest.InteropEnv) == "1" {
			t.Fatalf("no /dev/fuse: %v", err)
		}
		t.Skipf("no /dev/fuse: %v", err)
	}
}

// mounted reports whether dir is a mount point (in /proc/self/mountinfo).
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	return false
}

// waitFor polls cond for up to 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestMountCommand runs `gobtrfs mount` as a user would: in the
// foreground until SIGTERM (which unmounts and commits), and with
// --background and commit=1 (the changes are in the image a commit
// interval later, while still mounted; fusermount3 -u ends the daemon).
// Bad options are usage errors.
func TestMountCommand(t *testing.T) {
	requireMount(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	dir := t.TempDir()
	t.Cleanup(func() {
		if mounted(t, dir) {
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
	})

	if _, _, code := run(t, "mount", "-o", "nosuchoption", img, dir); code != ExitUsage {
		t.Errorf("mount -o nosuchoption: exit %d, want %d", code, ExitUsage)
	}

	fg := gobtrfsCmd("mount", img, dir)
	fg.Stderr = os.Stderr
	if err := fg.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the foreground mount", func() bool { return mounted(t, dir) })
	if err := os.WriteFile(filepath.Join(dir, "fg"), []byte("foreground"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fg.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := fg.Wait(); err != nil {
		t.Fatalf("mount after SIGTERM: %v", err)
	}
	if mounted(t, dir) {
		t.Fatal("still mounted after SIGTERM")
	}
	readBack(t, img, "fg", "foreground")

	bg := gobtrfsCmd("mount", "--background", "-o", "commit=1,noatime", img, dir)
	if out, err := bg.CombinedOutput(); err != nil {
		t.Fatalf("mount --background: %v\n%s", err, out)
	}
	if !mounted(t, dir) {
		t.Fatal("mount --background returned before the mount was ready")
	}
	if err := os.WriteFile(filepath.Join(dir, "bg"), []byte("background"), 0o644); err != nil {
		t.Fatal(err)
	}
	// commit=1: a reader of the image sees the file within seconds.
	waitFor(t, "the background commit", func() bool {
		fsys, err := btrfs.Open(img, nil)
		if err != nil {
			return false
		}
		defer fsys.Close()
		b, err := fsys.ReadFile("bg")
		return err == nil && string(b) == "background"
	})
	if out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v %s", err, out)
	}
	// The daemon releases the image (its writer's lock) once it has
	// committed and closed.
	waitFor(t, "the daemon to close the image", func() bool {
		fsys, err := btrfs.OpenWritable(img, nil)
		if errors.Is(err, btrfs.ErrLocked) {
			return false
		}
		if err == nil {
			fsys.Close()
		}
		return true
	})
	readBack(t, img, "bg", "background")
	btrfstest.Check(t, []string{img}, true)
}

// readBack checks that name in img reads want.
func readBack(t *testing.T, img, name, want string) {
	t.Helper()
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if b, err := fsys.ReadFile(name); err != nil || string(b) != want {
		t.Errorf("%s in the image: %q, %v; want %q", name, b, err, want)
	}
}
