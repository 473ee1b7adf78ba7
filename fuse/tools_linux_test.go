//go:build linux

package fuse_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// requireTool skips the test without the named program, or fails it when
// GOBTRFS_INTEROP=1 (.ci/run installs it).
func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err == nil {
		return
	}
	if os.Getenv(btrfstest.InteropEnv) == "1" {
		t.Fatalf("%s=1 but %s is not on PATH", btrfstest.InteropEnv, name)
	}
	t.Skipf("%s not on PATH (set %s=1 to make this fatal)", name, btrfstest.InteropEnv)
}

// runTool runs a program that others wrote against the mount and fails
// the test with its output if it reports a failure.
func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	// The tool runs in its own process: the test process serves the
	// mount and must not block on it (go-fuse's fs package doc, Deadlocks).
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// afterTool unmounts, checks the image (data checksums included) and
// compares the kernel's view of it with what our mount showed.
func afterTool(t *testing.T, m *mounted, img string) {
	t.Helper()
	want, err := btrfstest.Scan(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	btrfstest.Check(t, []string{img}, true)
	kmnt := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(kmnt)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, want, got, btrfstest.DiffOptions{IgnoreXattr: ignoreBtrfsXattrs, CompareNlink: true})
}

// TestFio runs fio with verification (crc32c of every block, read back
// after the writes) on our mount: sequential and random writes, psync and
// libaio, several jobs at once, fsync every few writes, and a mixed
// random read/write job. Sizes are small so that CI stays quick;
// GOBTRFS_LONG=1 writes more.
func TestFio(t *testing.T) {
	requireFUSE(t)
	requireTool(t, "fio")
	size := "4m"
	if os.Getenv("GOBTRFS_LONG") == "1" {
		size = "64m"
	}
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 1 << 30})
	m := mountImage(t, img, nil, nil)
	// --verify_state_save=0: fio would otherwise leave a state file per
	// job in the working directory, the package's source directory.
	out := runTool(t, "fio", "--directory="+m.dir, "--verify=crc32c", "--verify_fatal=1", "--verify_state_save=0", "--size="+size, "--fsync=16",
		"--name=seq", "--rw=write", "--bs=64k", "--ioengine=psync", "--numjobs=2",
		"--name=rand", "--rw=randwrite", "--bs=4k", "--ioengine=libaio", "--iodepth=8", "--numjobs=2",
		"--name=randrw", "--rw=randrw", "--bs=16k", "--ioengine=psync")
	if !strings.Contains(out, "err= 0") || strings.Contains(out, "verify:") {
		t.Errorf("fio reports a problem:\n%s", out)
	}
	afterTool(t, m, img)
}

// TestStressNG runs stress-ng's filesystem stressors for a few seconds
// each, all at once, on our mount; any failure they find fails the test.
func TestStressNG(t *testing.T) {
	requireFUSE(t)
	requireTool(t, "stress-ng")
	secs := "3s"
	if os.Getenv("GOBTRFS_LONG") == "1" {
		secs = "60s"
	}
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 1 << 30})
	m := mountImage(t, img, nil, nil)
	runTool(t, "stress-ng", "--temp-path", m.dir, "-t", secs,
		"--hdd", "1", "--hdd-bytes", "4M",
		"--dir", "1", "--dentry", "1", "--rename", "1", "--link", "1", "--symlink", "1",
		"--xattr", "1", "--fallocate", "1", "--fallocate-bytes", "4M", "--seek", "1", "--seek-size", "4M",
		"--lockf", "1")
	afterTool(t, m, img)
}

// TestSysbench runs sysbench fileio, the seed's workload, in every mode
// on our mount (small files, a second per mode in CI), with fsync every
// 100 requests; sysbench checks what it reads back.
func TestSysbench(t *testing.T) {
	requireFUSE(t)
	requireTool(t, "sysbench")
	secs, size := "1", "16M"
	if os.Getenv("GOBTRFS_LONG") == "1" {
		secs, size = "10", "256M"
	}
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: 1 << 30})
	m := mountImage(t, img, nil, nil)
	args := []string{"fileio", "--file-num=8", "--file-total-size=" + size, "--file-block-size=8192"}
	sysbench := func(more ...string) string {
		t.Helper()
		// Not cmd.Dir: see runACLScripts.
		cmd := exec.Command("sh", append([]string{"-c", `cd "$0" && exec sysbench "$@"`, m.dir}, append(append([]string{}, args...), more...)...)...)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "FATAL") {
			t.Fatalf("sysbench %s: %v\n%s", strings.Join(more, " "), err, out)
		}
		return string(out)
	}
	for _, mode := range []string{"seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw"} {
		sysbench("prepare")
		sysbench("--file-test-mode="+mode, "--file-fsync-freq=100", "--threads=8", "--time="+secs, "run")
	}
	afterTool(t, m, img)
}
