package btrfs_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// lockChildEnv names the image the helper process of
// TestWriteLockTwoProcesses opens for writing.
const lockChildEnv = "GOBTRFS_TEST_LOCK_CHILD"

// TestWriteLockInProcess: a second writer in the same process is refused
// at once while the first is open, a reader is not, and after the first
// Close a writer gets in again.
func TestWriteLockInProcess(t *testing.T) {
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c")
	first, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	if err := first.Mkdir("first", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}

	second, err := btrfs.OpenWritable(img, nil)
	if err == nil {
		second.Close()
		t.Fatal("a second writer was let in while the first is open")
	}
	if !errors.Is(err, btrfs.ErrLocked) || errors.Is(err, btrfs.ErrMounted) {
		t.Fatalf("second writer: %v; want ErrLocked", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, img+": ") || !strings.Contains(msg, "open for writing elsewhere") ||
		strings.Count(msg, img) != 1 {
		t.Errorf("second writer's error %q should name the image once and say why", msg)
	}

	r, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatalf("reader while a writer is open: %v", err)
	}
	if _, err := r.Stat("first"); err != nil {
		t.Errorf("reader does not see the writer's commit: %v", err)
	}
	r.Close()

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatalf("writer after the first closed: %v", err)
	}
	defer again.Close()
	if err := again.Mkdir("again", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := again.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestWriteLockTwoProcesses: while another process has the image open for
// writing, this one's writer is refused and its reader works; once the
// other process is gone, this one writes.
func TestWriteLockTwoProcesses(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("re-executes the test binary with Unix locking semantics")
	}
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestWriteLockHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+img)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("helper process: %q instead of ready", line)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("helper process did not open the image in 2 minutes")
	}

	w, err := btrfs.OpenWritable(img, nil)
	if err == nil {
		w.Close()
		t.Fatal("a writer was let in while another process has the image open for writing")
	}
	if !errors.Is(err, btrfs.ErrLocked) {
		t.Fatalf("writer while another process writes: %v; want ErrLocked", err)
	}
	r, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatalf("reader while another process writes: %v", err)
	}
	if _, err := r.Stat("child"); err != nil {
		t.Errorf("reader does not see the other process's commit: %v", err)
	}
	r.Close()

	stdin.Close() // the helper closes its writer and exits
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper process: %v", err)
	}
	w, err = btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatalf("writer after the other process exited: %v", err)
	}
	defer w.Close()
	if err := w.Mkdir("parent", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestWriteLockHelperProcess is the other process of
// TestWriteLockTwoProcesses; run on its own it does nothing. It opens the
// image for writing, commits a directory "child", says "ready" and holds
// the writer open until its stdin is closed.
func TestWriteLockHelperProcess(t *testing.T) {
	img := os.Getenv(lockChildEnv)
	if img == "" {
		return
	}
	w, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Mkdir("child", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("ready\n")
	io.Copy(io.Discard, os.Stdin)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriteLockNamedTwice: a writer that names its image twice (as the
// image and again as a further device) is one writer, not two: it opens,
// and holds the lock against others.
func TestWriteLockNamedTwice(t *testing.T) {
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c")
	w, err := btrfs.OpenWritable(img, &btrfs.Options{Devices: []string{img}})
	if err != nil {
		t.Fatalf("image named twice: %v", err)
	}
	defer w.Close()
	if err := w.Mkdir("x", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if other, err := btrfs.OpenWritable(img, nil); !errors.Is(err, btrfs.ErrLocked) {
		if err == nil {
			other.Close()
		}
		t.Fatalf("second writer: %v; want ErrLocked", err)
	}
}
