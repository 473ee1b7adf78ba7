//go:build !linux

package btrfstest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
)

// This file keeps the harness API compiling on hosts other than Linux, so
// that test packages can build there too. Loop
// devices, kernel mounts and the host-side scanner need Linux: their
// stand-ins here skip the calling test, or fail it when InteropEnv is set,
// exactly as RequireInterop does for a missing requirement. Fixtures still
// work (decompressed without the cache). The declarations mirror the Linux
// files by hand: CI cross-builds the packages but not their tests (which
// need Linux), so a field or function added there and used by a test
// must be added here too.

// FixtureCacheEnv names the fixture cache directory; the cache is Linux-only
// (it copies with SEEK_DATA and copy_file_range), so it is ignored here.
const FixtureCacheEnv = "GOBTRFS_FIXTURE_CACHE"

// ExtrefLinks and ExtrefNameLen size the hardlink set of PopulateLinks (see
// the Linux file populate_meta.go).
const (
	ExtrefLinks   = 330
	ExtrefNameLen = 200
)

// PopulateOptions selects the optional parts of PopulateAll (see the Linux
// file populate.go).
type PopulateOptions struct {
	BigDir        bool
	BigDirEntries int
	SetDefault    bool
}

// errNotLinux is what the stand-ins report.
var errNotLinux = fmt.Errorf("btrfstest: needs Linux (loop devices, kernel btrfs), host is %s: %w", runtime.GOOS, errors.ErrUnsupported)

// needLinux ends the calling test: a skip, or a failure when InteropEnv=1
// demands the interop environment.
func needLinux(tb testing.TB) {
	tb.Helper()
	if os.Getenv(InteropEnv) == "1" {
		tb.Fatal(errNotLinux)
	}
	tb.Skip(errNotLinux)
}

var errNoCache = errors.New("fixture cache disabled")

// cachedFixture always declines, so OpenFixture decompresses directly.
func cachedFixture(string) (string, error) { return "", errNoCache }

// sparseCopy is never reached (cachedFixture declines).
func sparseCopy(string, string) error { return errNoCache }

type fsidLock struct{}

func (*fsidLock) release() {}

// lockFSID has nothing to serialize: nothing is ever mounted here.
func lockFSID(tb testing.TB, _ string) *fsidLock { return &fsidLock{} }

func kernelLog() string { return "" }

// Mount needs the Linux kernel.
func Mount(tb testing.TB, _ string, _ ...string) string { needLinux(tb); return "" }

// Unmount needs the Linux kernel.
func Unmount(tb testing.TB, _ string) { needLinux(tb) }

// Scan needs Linux stat, statfs and xattr semantics.
func Scan(string) (*Tree, error) { return nil, errNotLinux }

// PopulateAll fills a mounted btrfs, which needs Linux.
func PopulateAll(tb testing.TB, _ string, _ int64, _ PopulateOptions) { needLinux(tb) }

// PopulateFiles needs Linux.
func PopulateFiles(tb testing.TB, _ string, _ int64) { needLinux(tb) }

// PopulateExtents needs Linux.
func PopulateExtents(tb testing.TB, _ string, _ int64) { needLinux(tb) }

// PopulateCompressed needs Linux.
func PopulateCompressed(tb testing.TB, _ string, _ int64) { needLinux(tb) }

// PopulateFixture needs Linux.
func PopulateFixture(tb testing.TB, _ string, _ int64, _ bool) { needLinux(tb) }

// PopulateLinks needs Linux.
func PopulateLinks(tb testing.TB, _ string, _ int64) { needLinux(tb) }

// PopulateXattrs needs Linux.
func PopulateXattrs(tb testing.TB, _ string, _ int64) { needLinux(tb) }

// PopulateModes needs Linux.
func PopulateModes(tb testing.TB, _ string, _ int64) { needLinux(tb) }

// PopulateBigDir needs Linux.
func PopulateBigDir(tb testing.TB, _ string, _ int64, _ int) { needLinux(tb) }

// PopulateSpecial needs Linux.
func PopulateSpecial(tb testing.TB, _ string, _ int64) { needLinux(tb) }

// PopulateNames needs Linux.
func PopulateNames(tb testing.TB, _ string, _ int64) { needLinux(tb) }

// PopulateSubvolumes needs Linux.
func PopulateSubvolumes(tb testing.TB, _ string, _ int64, _ bool) { needLinux(tb) }

// flushBuffers has no loop devices to flush off Linux.
func flushBuffers(string) {}

// FiemapExtent is one extent of a host file (see the Linux file
// fiemap.go).
type FiemapExtent struct {
	Logical, Physical, Length uint64
	Shared                    bool
}

// Fiemap needs Linux's FIEMAP ioctl.
func Fiemap(tb testing.TB, _ string) []FiemapExtent { needLinux(tb); return nil }

// fixtureCacheDir: there is no fixture cache off Linux.
func fixtureCacheDir() (string, error) { return "", errNoCache }
