//go:build linux

package fuse_test

import (
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// posixExcluded lists the go-fuse posixtest cases that do not apply, and
// why. Every other case of posixtest.All must pass.
var posixExcluded = map[string]string{
	// POSIX record locks belong to the process: two descriptors of one
	// process never conflict (fcntl(2)), and the kernel's btrfs says
	// nil here too. The case expects a lock manager in the filesystem
	// keyed by descriptor; the mount leaves locks to the kernel.
	"FcntlFlockLocksFile": "POSIX locks of one process do not conflict on Linux; the case expects per-descriptor owners",
}

// TestPosix runs go-fuse's POSIX conformance suite (posixtest.All, written
// by go-fuse's authors for any FUSE filesystem) against our read-write
// mount, each case on a fresh image that btrfs check then passes.
func TestPosix(t *testing.T) {
	requireFUSE(t)
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if why, ok := posixExcluded[name]; ok {
				t.Skip(why)
			}
			img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
			m := mountImage(t, img, nil, nil)
			posixtest.All[name](t, m.dir)
			m.unmount(t)
			btrfstest.Check(t, []string{img}, true)
		})
	}
}
