package btrfstest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// InteropEnv is the environment variable that turns interop skips into
// failures. CI sets it to "1" so that a broken runner (no loop devices, no
// btrfs-progs) cannot make the interop suite pass vacuously.
const InteropEnv = "GOBTRFS_INTEROP"

var (
	progsOnce    sync.Once
	progsReason  string
	interopOnce  sync.Once
	interopCause string
)

// progsMissing says why btrfs-progs cannot be used, or "" if they can.
// The answer cannot change during a test run, so it is computed once.
func progsMissing() string {
	progsOnce.Do(func() {
		for _, tool := range []string{"mkfs.btrfs", "btrfs"} {
			if _, err := exec.LookPath(tool); err != nil {
				progsReason = tool + " not found on PATH"
				return
			}
		}
	})
	return progsReason
}

// interopMissing says why the full kernel interop environment is not
// available, or "" if it is.
func interopMissing() string {
	interopOnce.Do(func() {
		if r := progsMissing(); r != "" {
			interopCause = r
			return
		}
		if os.Geteuid() != 0 {
			interopCause = "not running as root"
			return
		}
		if _, err := exec.LookPath("losetup"); err != nil {
			interopCause = "losetup not found on PATH"
			return
		}
		if _, err := os.Stat("/dev/loop-control"); err != nil {
			interopCause = "no loop devices: " + err.Error()
			return
		}
		if !kernelHasBtrfs() {
			interopCause = "kernel has no btrfs (not in /proc/filesystems)"
		}
	})
	return interopCause
}

// kernelHasBtrfs reports whether the running kernel can mount btrfs. A
// modular btrfs appears in /proc/filesystems only once loaded, so one
// modprobe attempt is made before giving up.
func kernelHasBtrfs() bool {
	if procHasBtrfs() {
		return true
	}
	if _, err := exec.LookPath("modprobe"); err == nil {
		_ = exec.Command("modprobe", "btrfs").Run()
	}
	return procHasBtrfs()
}

func procHasBtrfs() bool {
	f, err := os.Open("/proc/filesystems")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && fields[len(fields)-1] == "btrfs" {
			return true
		}
	}
	return false
}

// Interop reports whether the kernel interop environment (root, btrfs-progs,
// losetup, loop devices, kernel btrfs) is available. Use it for optional
// extra checks inside tests that do not require interop; use RequireInterop
// for tests that do.
func Interop() bool { return interopMissing() == "" }

// RequireInterop skips the test when the kernel interop environment is not
// available, or fails it when GOBTRFS_INTEROP=1. Every function of this
// package that needs the kernel calls it, so calling it first is only needed
// to skip before doing other work.
func RequireInterop(tb testing.TB) {
	tb.Helper()
	if r := interopMissing(); r != "" {
		skipOrFail(tb, r)
	}
}

// RequireProgs is RequireInterop for tests that only run btrfs-progs on image
// files (mkfs.btrfs, btrfs check) and need neither root nor the kernel.
func RequireProgs(tb testing.TB) {
	tb.Helper()
	if r := progsMissing(); r != "" {
		skipOrFail(tb, r)
	}
}

// skipOrFail applies the GOBTRFS_INTEROP rule to a missing requirement.
func skipOrFail(tb testing.TB, reason string) {
	tb.Helper()
	if os.Getenv(InteropEnv) == "1" {
		tb.Fatalf("%s=1 but interop is unavailable: %s", InteropEnv, reason)
		return
	}
	tb.Skip(fmt.Sprintf("interop unavailable (set %s=1 to make this fatal): %s", InteropEnv, reason))
}
