//go:build linux

package fuse_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// childEnv makes the test binary a mount daemon (TestMain): the value is
// "IMAGE\nMOUNTPOINT".
const childEnv = "GOBTRFS_FUSE_TEST_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(serveChild(v))
	}
	os.Exit(m.Run())
}

// serveChild mounts the image read-write, says "ready" on stdout and
// serves until unmounted or killed.
func serveChild(v string) int {
	img, dir, _ := strings.Cut(v, "\n")
	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, err := fuse.Mount(dir, fsys, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	srv.Wait()
	if err := fsys.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestKill9 kills the mount daemon (kill -9) after files were written and
// fsynced, and some written without: the image must open, pass btrfs check
// and hold everything that was fsynced, on our reader and on the kernel's
// mount.
func TestKill9(t *testing.T) {
	requireFUSE(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+img+"\n"+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
		// A dead daemon leaves its mount point "transport endpoint not
		// connected" until unmounted.
		exec.Command("fusermount3", "-u", "-z", dir).Run()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("the mount daemon did not start: %q, %v", line, err)
	}

	rng := rand.New(rand.NewPCG(9, 9))
	want := map[string][]byte{}
	write := func(name string, n int, sync bool) {
		t.Helper()
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			want[name] = data
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		write(fmt.Sprintf("d%d/f%d", i%3, i), 1+rng.IntN(200_000), true)
	}
	write("big", 8<<20, true)
	if err := os.Rename(filepath.Join(dir, "d0/f0"), filepath.Join(dir, "renamed")); err != nil {
		t.Fatal(err)
	}
	want["renamed"] = want["d0/f0"]
	delete(want, "d0/f0")
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil { // fsyncdir: the rename is durable
		t.Fatal(err)
	}
	d.Close()
	// A file open after its last name went, durable in the orphan
	// directory at the kill: the next mount removes it.
	write("held", 5000, false)
	held, err := os.OpenFile(filepath.Join(dir, "held"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := os.Remove(filepath.Join(dir, "held")); err != nil {
		t.Fatal(err)
	}
	if err := held.Sync(); err != nil {
		t.Fatal(err)
	}
	write("unsynced", 100_000, false)

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	held.Close()
	if out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput(); err != nil {
		t.Logf("fusermount3 -u: %v %s", err, out)
	}
	time.Sleep(100 * time.Millisecond)

	btrfstest.Check(t, []string{img}, true)
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for name, data := range want {
		got, err := fsys.ReadFile(name)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s after kill -9: %d bytes, %v; want the %d fsynced", name, len(got), err, len(data))
		}
	}
	fsys.Close()
	kmnt := btrfstest.Mount(t, "ro", img)
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(kmnt, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s on the kernel's mount: %d bytes, %v", name, len(got), err)
		}
	}
	if _, err := os.Stat(filepath.Join(kmnt, ".gobtrfs-orphans")); err != nil {
		t.Errorf("the orphan directory was not durable before the kill: %v", err)
	}
	btrfstest.Unmount(t, kmnt)

	m := mountImage(t, img, nil, nil)
	m.unmount(t)
	kmnt = btrfstest.Mount(t, "ro", img)
	if _, err := os.Stat(filepath.Join(kmnt, ".gobtrfs-orphans")); !os.IsNotExist(err) {
		t.Errorf("the next mount left the orphan directory: %v", err)
	}
	btrfstest.Unmount(t, kmnt)
	btrfstest.Check(t, []string{img}, true)
}
