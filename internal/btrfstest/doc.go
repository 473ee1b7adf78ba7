// Package btrfstest is the interop test harness of gobtrfs: it makes btrfs
// images with mkfs.btrfs, attaches them to loop devices, mounts them with the
// Linux kernel, fills them through the kernel with every kind of content the
// read and write paths must handle, and records what the kernel shows as a
// comparable Tree (Scan, Diff, manifest files).
//
// Every fact a gobtrfs test asserts about the on-disk format is proven
// against Linux this way; fixtures are never edited by hand.
//
// # Environment rule
//
// Functions that need btrfs-progs, loop devices, root or kernel btrfs call
// RequireInterop (or RequireProgs). On a machine without them the test is
// skipped, unless GOBTRFS_INTEROP=1 is set (CI sets it): then the missing
// requirement fails the test, so CI can never pass by skipping.
//
// # Invariants
//
//   - Everything set up is torn down by tb.Cleanup, also when the test fails:
//     mounts are unmounted (retried, then lazily), loop devices this package
//     attached are detached, and only those.
//   - Mount points are always under tb.TempDir(); nothing outside the test's
//     temporary directories is created, mounted or modified.
//   - Loop devices are allocated with `losetup --find --show`, which the
//     kernel makes safe across concurrently running test processes. No
//     /dev/loopN is ever assumed, and a loop device is detached only if it
//     still has the backing file this package gave it.
//   - Only one filesystem with a given fsid is mounted at a time, across
//     processes (a flock per fsid in os.TempDir()): mounting a copy of a
//     mounted filesystem relies on the kernel's temp-fsid support, which
//     proved racy. Copies of one fixture in parallel packages therefore take
//     turns; two at once in one process fail fast.
//   - Populate functions are deterministic functions of their seed (file
//     contents, names, modes, times, independent of the umask); only
//     kernel-chosen values such as inode numbers, and the mtimes of
//     directories changed after populating, differ between runs.
//
// # Typical use
//
//	btrfstest.RequireInterop(t)
//	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096})
//	dir := btrfstest.Mount(t, "", img)
//	btrfstest.PopulateAll(t, dir, seed, btrfstest.PopulateOptions{BigDir: !testing.Short()})
//	want, err := btrfstest.Scan(dir)
//	btrfstest.Unmount(t, dir)
//	// ... read img with gobtrfs, extract to t.TempDir() ...
//	got, err := btrfstest.Scan(extracted)
//	if d := btrfstest.Diff(want, got, btrfstest.DiffOptions{}); len(d) > 0 { t.Error(d) }
//
// # What it must never do
//
// It is imported only by _test.go files (and by nothing of the library). It
// never touches devices or mounts it did not create, and never kills or
// unmounts by name.
//
// # Fixtures
//
// testdata/images at the module root holds small zstd-compressed images with
// a manifest each (see testdata/images/README.md). OpenFixture and
// LoadManifest give tests on machines without btrfs-progs what the kernel
// showed when the image was generated. Fixtures named log-* hold a log
// tree to replay (their manifest is the kernel's view after its replay);
// FixtureNames leaves them out and LogFixtureNames lists them.
package btrfstest
