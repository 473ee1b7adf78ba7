package mkfs

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// matrixRow is one option set of TestBuildMatrix.
type matrixRow struct {
	name  string
	tar   bool // build from the test archive instead of the host tree
	opts  BuildOptions
	twice bool // build twice and want identical bytes
}

// matrixRows cover every value of every option without the cross
// product:
//
//	row            source csum    node  compress  meta/data    other
//	crc32c-16k     dir    crc32c  16K   none      dup/single   (the defaults)
//	xxhash-4k      dir    xxhash  4K    zlib:9    single/dup
//	sha256-64k     dir    sha256  64K   lzo       dup/dup
//	blake2-16k     dir    blake2  16K   zstd:9    dup/single
//	shrink-4k      dir    crc32c  4K    zstd:1    dup/single   --shrink
//	shrink-single  dir    sha256  16K   zlib:1    single/single --shrink
//	subvol-64k     dir    blake2  64K   none      dup/single   --subvol x2, SOURCE_DATE_EPOCH, built twice
//	chown-chmod    dir    xxhash  16K   none      dup/single   --chown, --chmod
//	tar-4k         tar    sha256  4K    zstd:3    dup/single
//	tar-override   tar    crc32c  16K   none      dup/dup      --chown, --chmod, SOURCE_DATE_EPOCH, built twice
//	tar-shrink     tar    blake2  4K    lzo       single/dup   --shrink
var matrixRows = []matrixRow{
	{name: "crc32c-16k", opts: BuildOptions{}},
	{name: "xxhash-4k", opts: BuildOptions{Format: Options{Csum: btrfs.CsumXXHash, NodeSize: 4096, MetadataProfile: "single", DataProfile: "dup"},
		Compress: "zlib", CompressLevel: 9}},
	// 512 MiB: in 256 MiB the kernel's own writes hit ENOSPC with 64 KiB
	// nodes and DUP everything (its metadata reservations are per node;
	// the same happens on a mkfs.btrfs image).
	{name: "sha256-64k", opts: BuildOptions{Format: Options{Csum: btrfs.CsumSHA256, NodeSize: 65536, DataProfile: "dup", Size: 512 << 20},
		Compress: "lzo"}},
	{name: "blake2-16k", opts: BuildOptions{Format: Options{Csum: btrfs.CsumBlake2}, Compress: "zstd", CompressLevel: 9}},
	{name: "shrink-4k", opts: BuildOptions{Format: Options{NodeSize: 4096}, Compress: "zstd", CompressLevel: 1, Shrink: true}},
	{name: "shrink-single", opts: BuildOptions{Format: Options{Csum: btrfs.CsumSHA256, MetadataProfile: "single"},
		Compress: "zlib", CompressLevel: 1, Shrink: true}},
	{name: "subvol-64k", twice: true, opts: BuildOptions{Format: Options{Csum: btrfs.CsumBlake2, NodeSize: 65536},
		Subvolumes: []string{"d1/d2/d3", "with space\nand newline"}, Epoch: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}},
	{name: "chown-chmod", opts: BuildOptions{Format: Options{Csum: btrfs.CsumXXHash}, Owner: &Owner{UID: 7, GID: 8}, Chmod: "D750,Fgo-w,Fa+r"}},
	{name: "tar-4k", tar: true, opts: BuildOptions{Format: Options{Csum: btrfs.CsumSHA256, NodeSize: 4096}, Compress: "zstd", CompressLevel: 3}},
	{name: "tar-override", tar: true, twice: true, opts: BuildOptions{Format: Options{DataProfile: "dup"},
		Owner: &Owner{UID: 7, GID: 8}, Chmod: "D755,Fgo-w,Fa+r", Epoch: time.Unix(1750000000, 0)}},
	{name: "tar-shrink", tar: true, opts: BuildOptions{Format: Options{Csum: btrfs.CsumBlake2, NodeSize: 4096, MetadataProfile: "single", DataProfile: "dup"},
		Compress: "lzo", Shrink: true}},
}

// TestBuildMatrix builds the host tree (holes, a 5 MiB file, hardlinks,
// symlinks, a fifo, devices, a socket, xattrs, odd names, set-id modes,
// nanosecond times) or the test archive with each option set of
// matrixRows, and for each image: btrfs check --check-data-csum is clean,
// the kernel mounts it read-only and shows exactly the input, scrub finds
// no error; then the kernel mounts it read-write, writes, overwrites and
// deletes files (after growing a shrunk image), and btrfs check, a
// remount and scrub still find everything in order.
func TestBuildMatrix(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	src := t.TempDir()
	populateHost(t, src, seed)
	if err := os.Truncate(filepath.Join(src, "big"), 5<<20); err != nil {
		t.Fatal(err)
	}
	// Something the compressors do shrink (the random data they store as is).
	if err := os.WriteFile(filepath.Join(src, "d1/compressible"), bytes.Repeat([]byte("gobtrfs matrix "), 70000), 0o644); err != nil {
		t.Fatal(err)
	}
	hostWant, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := testTar(t)
	tarBytes := makeTar(t, ms)
	for _, row := range matrixRows {
		t.Run(row.name, func(t *testing.T) {
			opts := row.opts
			open, want, dopts := dirOpener(src), copyTree(hostWant), btrfstest.DiffOptions{CompareNlink: true}
			if row.tar {
				now := time.Unix(1760000000, 0)
				if !opts.Epoch.IsZero() {
					now = opts.Epoch
				} else {
					opts.Format.Time = now
				}
				open, want, dopts = tarOpener(tarBytes), expectTar(ms, now), btrfstest.DiffOptions{}
			}
			overrides(t, want, &opts)
			img := buildImage(t, open, opts)
			if row.twice {
				a, _ := os.ReadFile(img)
				b, _ := os.ReadFile(buildImage(t, open, opts))
				if !bytes.Equal(a, b) {
					t.Error("two builds with SOURCE_DATE_EPOCH differ")
				}
			}
			matrixVerify(t, img, want, dopts, opts.Shrink)
		})
	}
}

// copyTree is a deep enough copy of tr for overrides to change entries.
func copyTree(tr *btrfstest.Tree) *btrfstest.Tree {
	c := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{}, Links: tr.Links}
	for p, e := range tr.Entries {
		ec := *e
		c.Entries[p] = &ec
	}
	return c
}

// overrides applies --chown and --chmod of opts to the expected tree.
func overrides(t *testing.T, want *btrfstest.Tree, opts *BuildOptions) {
	t.Helper()
	chmod, err := parseChmodOption(opts.Chmod)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range want.Entries {
		if opts.Owner != nil {
			e.UID, e.GID = opts.Owner.UID, opts.Owner.GID
		}
		if chmod == nil || e.Type == btrfstest.TypeSymlink {
			continue
		}
		k := KindFile
		if e.Type == btrfstest.TypeDir {
			k = KindDir
		}
		e.Perm = chmod(k, e.Perm)
	}
}

// matrixVerify is the per-image part of TestBuildMatrix.
func matrixVerify(t *testing.T, img string, want *btrfstest.Tree, dopts btrfstest.DiffOptions, shrunk bool) {
	t.Helper()
	btrfstest.Check(t, []string{img}, true)
	mnt := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if d := btrfstest.Diff(want, got, dopts); len(d) > 0 {
		t.Errorf("kernel shows something else than the input:\n%s", strings.Join(d, "\n"))
	}
	if r := btrfstest.Scrub(t, mnt); r.Devices[0].Counters["data_bytes_scrubbed"] == 0 {
		t.Error("scrub read no data")
	}
	btrfstest.Unmount(t, mnt)

	if shrunk {
		// A shrunk image has no room to write; grow it as a user would.
		fi, err := os.Stat(img)
		if err != nil {
			t.Fatal(err)
		}
		// The kernel refuses to resize to less than 256 MiB.
		if err := os.Truncate(img, max(fi.Size()+128<<20, 320<<20)); err != nil {
			t.Fatal(err)
		}
	}
	mnt = btrfstest.Mount(t, "", img)
	if shrunk {
		if out, err := exec.Command("btrfs", "filesystem", "resize", "max", mnt).CombinedOutput(); err != nil {
			t.Fatalf("resize max: %v\n%s", err, out)
		}
	}
	kernelWrites(t, mnt, got)
	written, err := btrfstest.Scan(mnt)
	if err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, mnt)
	btrfstest.Check(t, []string{img}, true)
	mnt = btrfstest.Mount(t, "ro", img)
	again, err := btrfstest.Scan(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if d := btrfstest.Diff(written, again, btrfstest.DiffOptions{CompareNlink: true}); len(d) > 0 {
		t.Errorf("kernel writes did not survive a remount:\n%s", strings.Join(d, "\n"))
	}
	btrfstest.Scrub(t, mnt)
	btrfstest.Unmount(t, mnt)
}

// kernelWrites changes the mounted image through the kernel: of the
// regular files in tr, every third is removed, every third gets 64 KiB
// written over its middle (growing small ones), every third is cut to
// half; new files and a directory are added and one file renamed.
func kernelWrites(t *testing.T, mnt string, tr *btrfstest.Tree) {
	t.Helper()
	var files []string
	for p, e := range tr.Entries {
		if e.Type == btrfstest.TypeRegular {
			files = append(files, p)
		}
	}
	sort.Strings(files)
	must := func(err error) {
		t.Helper()
		if err != nil {
			// ENOSPC is the likely finding: show the space accounting.
			out, _ := exec.Command("btrfs", "filesystem", "usage", "-b", mnt).CombinedOutput()
			t.Fatalf("%v\n%s", err, out)
		}
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	for i, p := range files {
		full := filepath.Join(mnt, p)
		switch i % 3 {
		case 0:
			must(os.Remove(full))
		case 1:
			f, err := os.OpenFile(full, os.O_WRONLY, 0)
			must(err)
			_, err = f.WriteAt(random(64<<10), tr.Entries[p].Size/2)
			must(err)
			must(f.Close())
		case 2:
			must(os.Truncate(full, tr.Entries[p].Size/2))
		}
	}
	must(os.MkdirAll(filepath.Join(mnt, "kernel/dir"), 0o755))
	must(os.WriteFile(filepath.Join(mnt, "kernel/random"), random(3<<20), 0o644))
	must(os.WriteFile(filepath.Join(mnt, "kernel/dir/text"), bytes.Repeat([]byte("kernel "), 50000), 0o600))
	if len(files) > 1 {
		must(os.Rename(filepath.Join(mnt, files[1]), filepath.Join(mnt, "kernel/renamed")))
	}
	if out, err := exec.Command("sync", "-f", filepath.Join(mnt, "kernel/random")).CombinedOutput(); err != nil {
		t.Fatalf("sync: %v %s", err, out)
	}
}
