package txn_test

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestShrinkKernel shrinks images and hands them to the kernel: it must
// mount them read-write and report the new device size, our files must
// read back the same, a file the kernel writes must survive a remount,
// and btrfs check must stay clean.
func TestShrinkKernel(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, f := range shrinkFormats {
		if testing.Short() && f.opts.Size > 256<<20 {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed(t)))
			img := btrfstest.Mkfs(t, f.opts)
			want := map[string][]byte{}
			fillImage(t, img, rng, f.dataMiB, want)
			size := shrinkOnce(t, img, nil)
			btrfstest.Check(t, []string{img}, true)

			dir := btrfstest.Mount(t, "", img)
			if got := deviceSize(t, dir); got != size {
				t.Errorf("btrfs filesystem usage: device size %d, want %d", got, size)
			}
			for name, w := range want {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatalf("read %s: %v", name, err)
				}
				if !bytes.Equal(got, w) {
					t.Fatalf("%s: kernel reads %d bytes that differ from the %d written", name, len(got), len(w))
				}
			}
			// A shrunk image has no unallocated space and its last chunk
			// is full: the kernel may refuse even a small (inline) file
			// for want of metadata reserve. Then grow the image as a user
			// would (btrfs filesystem resize max) and write again.
			extra := randBytes(rng, 1500)
			err := os.WriteFile(filepath.Join(dir, "kernel"), extra, 0o644)
			if errors.Is(err, syscall.ENOSPC) {
				// The kernel refuses to resize below 256 MiB.
				grown := max(int64(size)+64<<20, 320<<20)
				t.Logf("kernel write into the shrunk image: %v; growing it to %d", err, grown)
				btrfstest.Unmount(t, dir)
				if err := os.Truncate(img, grown); err != nil {
					t.Fatal(err)
				}
				dir = btrfstest.Mount(t, "", img)
				if out, err := exec.Command("btrfs", "filesystem", "resize", "max", dir).CombinedOutput(); err != nil {
					t.Fatalf("resize max: %v\n%s", err, out)
				}
				extra = randBytes(rng, 256<<10)
				err = os.WriteFile(filepath.Join(dir, "kernel"), extra, 0o644)
			}
			if err != nil {
				t.Fatalf("kernel write after shrink: %v", err)
			}
			btrfstest.Unmount(t, dir)
			btrfstest.Check(t, []string{img}, true)
			want["kernel"] = extra
			verifyFiles(t, []string{img}, want)
		})
	}
}

// deviceSize is the "Device size" line of `btrfs filesystem usage -b`.
func deviceSize(t *testing.T, dir string) uint64 {
	t.Helper()
	out, err := exec.Command("btrfs", "filesystem", "usage", "-b", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("btrfs filesystem usage: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Device size:\s+(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no device size in\n%s", out)
	}
	v, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return v
}
