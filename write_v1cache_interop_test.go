package btrfs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/blockdev"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// v1ImageSize is the size of the v1 space cache images: the kernel
// writes no cache file for a block group under 100 MiB, and makes data
// groups of a tenth of the device rounded down to 16 MiB, so the images
// are 1.25 GiB (sparse: they cost what is written), and the kernel's
// data groups 128 MiB.
const v1ImageSize = 1280 << 20

// v1FillerSize is the size of the file makeV1Image writes so that the
// kernel fills mkfs's 8 MiB data group and makes one of 128 MiB, which
// gets a cache file.
const v1FillerSize = 10 << 20

// v1State is what the superblock and root tree say about the space cache.
type v1State struct {
	cacheGen uint64
	fst      bool // compat_ro FREE_SPACE_TREE and FREE_SPACE_TREE_VALID
	headers  int  // (FREE_SPACE, 0, group) items in the root tree
	inodes   int  // INODE_ITEMs in the root tree besides ROOT_TREE_DIR's
}

var (
	cacheGenRe = regexp.MustCompile(`(?m)^cache_generation\s+(\d+)$`)
	compatRORe = regexp.MustCompile(`(?m)^compat_ro_flags\s+0x([0-9a-f]+)`)
	rootInoRe  = regexp.MustCompile(`item \d+ key \((\d+) INODE_ITEM 0\)`)
)

// spaceCacheState reads img's space cache state with btrfs-progs.
func spaceCacheState(t *testing.T, img string) v1State {
	t.Helper()
	run := func(args ...string) string {
		out, err := exec.Command("btrfs", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("btrfs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	super := run("inspect-internal", "dump-super", img)
	root := run("inspect-internal", "dump-tree", "-t", "root", img)
	var st v1State
	m := cacheGenRe.FindStringSubmatch(super)
	c := compatRORe.FindStringSubmatch(super)
	if m == nil || c == nil {
		t.Fatalf("dump-super of %s: no cache_generation or compat_ro_flags:\n%s", img, super)
	}
	st.cacheGen, _ = strconv.ParseUint(m[1], 10, 64)
	flags, _ := strconv.ParseUint(c[1], 16, 64)
	st.fst = flags&3 == 3
	st.headers = strings.Count(root, "(FREE_SPACE UNTYPED ")
	st.inodes = len(rootInoRe.FindAllString(root, -1))
	return st
}

// makeV1Image formats an image with mkfs.btrfs without the free-space
// tree and lets the kernel fill it under space_cache=v1, which writes a
// cache file for every large block group it allocated from: fill's files
// and the top-level file "v1-filler", whose contents it returns. The
// image must come out with cache files, or the test tests nothing.
func makeV1Image(t *testing.T, seed uint64, fill func(dir string)) (string, []byte) {
	t.Helper()
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Size: v1ImageSize, Extra: []string{"-R", "^free-space-tree"}})
	dir := btrfstest.Mount(t, "space_cache=v1", img)
	filler := make([]byte, v1FillerSize)
	r := rand.New(rand.NewPCG(seed, 0xf111))
	for i := range filler {
		filler[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(filepath.Join(dir, "v1-filler"), filler, 0o644); err != nil {
		t.Fatal(err)
	}
	fill(dir)
	btrfstest.Unmount(t, dir)
	st := spaceCacheState(t, img)
	if st.fst || st.cacheGen == 0 || st.headers == 0 || st.inodes == 0 {
		t.Fatalf("the kernel's space_cache=v1 image has no v1 cache: %+v", st)
	}
	t.Logf("v1 image: %+v", st)
	return img, filler
}

// requireConverted fails unless img is as the kernel leaves a v1
// filesystem mounted with space_cache=v2: the free-space tree on, cache
// generation 0, and no cache file left in the root tree.
func requireConverted(t *testing.T, img string) {
	t.Helper()
	if st := spaceCacheState(t, img); !st.fst || st.cacheGen != 0 || st.headers != 0 || st.inodes != 0 {
		t.Fatalf("after our commit: %+v, want the free-space tree, cache generation 0 and no cache files", st)
	}
}

// bytesSum is the hex SHA-256 of b.
func bytesSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestSpaceCacheV1Convert changes a filesystem the kernel filled with the
// v1 space cache. A session that only rolls back leaves the image byte
// for byte as it was. The first commit converts it as the kernel's
// space_cache=v2 mount does: btrfs check (6.2, and 6.19 where
// GOBTRFS_PROGS_DIR names it) is clean, the cache files are gone, the
// kernel shows the kernel's files unchanged and ours with their contents,
// writes more, and check stays clean.
func TestSpaceCacheV1Convert(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := int64(testSeed(t))
	img, _ := makeV1Image(t, uint64(seed), func(dir string) {
		btrfstest.PopulateFiles(t, dir, seed)
		btrfstest.PopulateLinks(t, dir, seed)
		btrfstest.PopulateXattrs(t, dir, seed)
	})
	devs := []string{img}
	dir := btrfstest.Mount(t, "ro", devs...)
	want, err := btrfstest.Scan(dir)
	btrfstest.Unmount(t, dir)
	if err != nil {
		t.Fatal(err)
	}

	// Opened, changed and rolled back: nothing is written.
	before := readImage(t, img)
	fsys := openWritable(t, devs)
	if err := fsys.WriteFile("dropped", []byte("never committed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if after := readImage(t, img); !maps.EqualFunc(before.chunks, after.chunks, bytes.Equal) {
		t.Fatal("a session without a commit changed the v1 image")
	}

	// The converting commit, with file data in it.
	r := rand.New(rand.NewPCG(uint64(seed), 15))
	sums := map[string]string{}
	fsys = openWritable(t, devs)
	if err := fsys.Mkdir("v1", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		data := make([]byte, 1+r.IntN(3<<20))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		name := fmt.Sprintf("v1/f%d", i)
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		sums[name] = bytesSum(data)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	requireConverted(t, img)
	btrfstest.Check(t, devs, true)
	btrfstest.CheckNewer(t, img, true)

	// The kernel shows both; it writes more.
	dir = btrfstest.Mount(t, "", devs...)
	got, err := btrfstest.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	ours := func(p string) bool { return p == "." || p == "v1" || strings.HasPrefix(p, "v1/") }
	opts := btrfstest.DiffOptions{CompareNlink: true, Filter: func(p string) bool { return !ours(p) }}
	if d := btrfstest.Diff(want, got, opts); len(d) > 0 {
		t.Errorf("the kernel shows its files changed:\n%s", strings.Join(d, "\n"))
	}
	for name, sum := range sums {
		if e := got.Entries[name]; e == nil || e.SHA256 != sum {
			t.Errorf("%s: the kernel shows %+v, want sha256 %s", name, e, sum)
		}
	}
	kdata := bytes.Repeat([]byte("the kernel after the conversion\n"), 100000)
	if err := os.WriteFile(filepath.Join(dir, "v1", "kernel"), kdata, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "v1", "f0")); err != nil {
		t.Fatal(err)
	}
	btrfstest.Unmount(t, dir)
	requireConverted(t, img)
	btrfstest.Check(t, devs, true)
	btrfstest.CheckNewer(t, img, true)

	// We read the kernel's file and write on.
	fsys = openWritable(t, devs)
	if back, err := fsys.ReadFile("v1/kernel"); err != nil || !bytes.Equal(back, kdata) {
		t.Errorf("reading the kernel's file back: %d bytes, %v", len(back), err)
	}
	if err := fsys.RemoveAll("v1"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, devs, true)
	dir = btrfstest.Mount(t, "ro", devs...)
	got, err = btrfstest.Scan(dir)
	btrfstest.Unmount(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := btrfstest.Diff(want, got, btrfstest.DiffOptions{CompareNlink: true, Filter: func(p string) bool { return p != "." }}); len(d) > 0 {
		t.Errorf("after removing ours the kernel shows:\n%s", strings.Join(d, "\n"))
	}
}

// TestSpaceCacheV1ConvertNewChunks converts a filesystem mkfs.btrfs made
// without the free-space tree (cache generation -1: v1 requested, no cache
// file yet) in a commit that also makes new data chunks, whose
// FREE_SPACE_INFO items come from the chunk code, not the conversion's
// pass over the groups; each group must get exactly one.
func TestSpaceCacheV1ConvertNewChunks(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Extra: []string{"-R", "^free-space-tree"}})
	if st := spaceCacheState(t, img); st.fst || st.cacheGen == 0 {
		t.Fatalf("mkfs.btrfs -R ^free-space-tree made %+v", st)
	}
	fsys := openWritable(t, []string{img})
	groups := len(dataGroups(t, fsys))
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<20) // 48 MiB: more than the first data chunks
	if err := fsys.WriteFile("big", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	requireConverted(t, img)
	btrfstest.Check(t, []string{img}, true)
	btrfstest.CheckNewer(t, img, true)
	fsys = openWritable(t, []string{img})
	if n := len(dataGroups(t, fsys)); n <= groups {
		t.Errorf("%d data block groups after writing 48 MiB, want more than %d", n, groups)
	}
	if back, err := fsys.ReadFile("big"); err != nil || !bytes.Equal(back, data) {
		t.Errorf("reading back: %d bytes, %v", len(back), err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if !btrfstest.Interop() {
		return
	}
	dir := btrfstest.Mount(t, "ro", img)
	back, err := os.ReadFile(filepath.Join(dir, "big"))
	btrfstest.Unmount(t, dir)
	if err != nil || !bytes.Equal(back, data) {
		t.Errorf("the kernel reads %d bytes, %v", len(back), err)
	}
}

// TestCrashDuringSpaceCacheV1Convert cuts the power at the sync points
// and a sample of the writes of the commit that converts a v1 filesystem
// (and writes, changes and removes files): every crash image opens, holds
// the files of before or after, passes btrfs check --check-data-csum,
// and is either the v1 filesystem as it was or fully converted.
func TestCrashDuringSpaceCacheV1Convert(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x51))
	before := map[string][]byte{}
	img0, filler := makeV1Image(t, seed, func(dir string) {
		for i := range 6 {
			name := fmt.Sprintf("f%d", i)
			data := crashData(rng, []int{0, 100, 3000, 4096, 70000, 300000}[i])
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			before[name] = data
		}
	})
	before["v1-filler"] = filler
	base := readImage(t, img0)
	ops, after := genDataOps(rng, before, 10)
	for _, o := range ops {
		t.Logf("op: %s", o.desc)
	}
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")
	var opts btrfs.Options
	// pre is empty: its Commit does nothing, so the conversion is in the
	// transaction the power is cut in.
	ref := runWithLoss(t, base, work, &opts, nil, ops, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("transaction without a power loss: %v", ref.err)
	}
	if st := crashState(t, ref, check, before, after, "no loss"); st != "after" {
		t.Fatalf("transaction without a power loss left the %s state", st)
	}
	requireConverted(t, check)
	pts := dataLossPoints(ref.ops, rng, longTests())
	t.Logf("transaction made %d writes, %d syncs; trying %d loss points",
		ref.count[blockdev.OpWrite], ref.count[blockdev.OpSync], len(pts))
	states := map[string]int{}
	for i, lp := range pts {
		torn := i%2 == 1
		run := runWithLoss(t, base, work, &opts, nil, ops, lp, torn, rng)
		what := fmt.Sprintf("loss at %s %d (torn %v)", lp.op, lp.n, torn)
		if !run.lost || run.err == nil {
			t.Fatalf("%s: lost %v, transaction error %v", what, run.lost, run.err)
		}
		state := crashState(t, run, check, before, after, what)
		states[state]++
		st := spaceCacheState(t, check)
		switch {
		case state == "after" && (!st.fst || st.cacheGen != 0 || st.headers != 0 || st.inodes != 0):
			t.Fatalf("%s: the new files, but the space cache %+v", what, st)
		case state == "before" && (st.fst || st.cacheGen == 0 || st.headers == 0):
			t.Fatalf("%s: the old files, but the space cache %+v", what, st)
		}
	}
	t.Logf("after the losses: %d times the old state, %d times the new", states["before"], states["after"])
	if states["before"] == 0 {
		t.Error("no power loss left the old state")
	}
}

// blockGroupZeroV1Image is a v1 space cache filesystem whose first block
// group is at logical 0: btrfs-progs' fsck test image 012 (made by an old
// mkfs.btrfs; mkfs.btrfs 6.2 and 6.19 start at 13 MiB), emptied and
// grown to 1 GiB by the kernel under space_cache=v1, which then writes
// files (their data real: btrfs-image zeroed the image's own) and a cache
// file for a new group of 100 MiB or more. It returns the image and the
// kernel's files.
func blockGroupZeroV1Image(t *testing.T, r *rand.Rand) (string, map[string][]byte) {
	t.Helper()
	const name = "012-leaf-corruption__good.img"
	img := btrfstest.RestoreFsckImage(t, name)
	ro, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ro.Info()
	ro.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(info.BlockGroups) == 0 || info.BlockGroups[0].Start != 0 {
		t.Fatalf("%s: block groups %+v, want one at logical 0", name, info.BlockGroups)
	}
	if err := os.Truncate(img, 1<<30); err != nil {
		t.Fatal(err)
	}
	dir := btrfstest.Mount(t, "space_cache=v1", img)
	if out, err := exec.Command("btrfs", "filesystem", "resize", "max", dir).CombinedOutput(); err != nil {
		t.Fatalf("btrfs filesystem resize max: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string][]byte{"kernel-big": randomData(r, 40<<20)}
	for i, n := range []int{0, 100, 3000, 70000, 300000} {
		files[fmt.Sprintf("kernel%d", i)] = randomData(r, n)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	btrfstest.Unmount(t, dir)
	st := spaceCacheState(t, img)
	if st.fst || st.cacheGen == 0 || st.headers == 0 {
		t.Fatalf("the kernel left %+v, want a v1 space cache with a cache file", st)
	}
	t.Logf("v1 image: %+v", st)
	btrfstest.Check(t, []string{img}, true)
	return img, files
}

// requireCleared fails unless img is as the kernel leaves a v1
// filesystem mounted with clear_cache,nospace_cache: no free-space tree,
// cache generation 0, no cache file left.
func requireCleared(t *testing.T, img string) {
	t.Helper()
	if st := spaceCacheState(t, img); st.fst || st.cacheGen != 0 || st.headers != 0 || st.inodes != 0 {
		t.Fatalf("after our commit: %+v, want no free-space tree, cache generation 0 and no cache files", st)
	}
}

// TestSpaceCacheV1BlockGroupZero writes a v1 space cache filesystem whose
// first block group is at logical 0 (blockGroupZeroV1Image). No
// free-space tree passes btrfs check on such a filesystem (it reports
// "there is no free space entry for 0-65536", also after the kernel's own
// space_cache=v2 conversion, which this test shows), so the first commit
// removes the cache files without converting, as the kernel's
// clear_cache,nospace_cache mount does: check --check-data-csum (6.2, and
// 6.19 where GOBTRFS_PROGS_DIR names it) is clean, the cache files are
// gone, cache_generation is 0 and there is no free-space tree; the kernel
// shows the files, writes and removes, and check stays clean; we write
// on.
func TestSpaceCacheV1BlockGroupZero(t *testing.T) {
	btrfstest.RequireInterop(t)
	r := rand.New(rand.NewChaCha8([32]byte{42}))
	orig, files := blockGroupZeroV1Image(t, r)

	// Why not convert: the kernel's conversion of the same image.
	kimg := filepath.Join(t.TempDir(), "kernel.img")
	if out, err := exec.Command("cp", "--sparse=always", orig, kimg).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	btrfstest.Unmount(t, btrfstest.Mount(t, "space_cache=v2", kimg))
	if out, err := exec.Command("btrfs", "check", "--readonly", kimg).CombinedOutput(); err == nil {
		t.Logf("btrfs check now accepts the kernel's free-space tree of a block group at 0: the conversion could be made (docs/design/0021)")
	} else if !strings.Contains(string(out), "no free space entry for 0-65536") {
		t.Errorf("btrfs check of the kernel's conversion: %v\n%s", err, out)
	}

	fsys, err := btrfs.OpenWritable(orig, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, fsys, files)
	if err := writeRandomFiles(t, fsys, r, "ours", 8, 300<<10, files); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove("kernel2"); err != nil {
		t.Fatal(err)
	}
	delete(files, "kernel2")
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	requireCleared(t, orig)
	btrfstest.Check(t, []string{orig}, true)
	btrfstest.CheckNewer(t, orig, true)
	kernelSees(t, orig, files)
	dir := btrfstest.Mount(t, "", orig)
	kfiles := map[string][]byte{"kernel-a": randomData(r, 200<<10), "kernel-b": []byte("kernel\n")}
	for name, data := range kfiles {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "ours0")); err != nil {
		t.Fatal(err)
	}
	delete(files, "ours0")
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, []string{orig}, true)
	maps.Copy(files, kfiles)
	fsys, err = btrfs.OpenWritable(orig, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, fsys, files)
	if err := writeRandomFiles(t, fsys, r, "again", 4, 100<<10, files); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{orig}, true)
	btrfstest.CheckNewer(t, orig, true)
	kernelSees(t, orig, files)
}

// TestCrashDuringSpaceCacheV1Clear cuts the power during the first
// commit on a v1 filesystem with a block group at logical 0 (the commit
// that removes its cache files without converting), at every sync and
// superblock write and a sample of the other writes: every image left
// opens, holds the files of before or after, passes check with data
// checksums, and keeps its cache files exactly when it holds the old
// files.
func TestCrashDuringSpaceCacheV1Clear(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x52))
	img0, before := blockGroupZeroV1Image(t, rand.New(rand.NewChaCha8([32]byte{43})))
	base := readImage(t, img0)
	ops, after := genDataOps(rng, before, 10)
	for _, o := range ops {
		t.Logf("op: %s", o.desc)
	}
	work := filepath.Join(t.TempDir(), "work.img")
	check := filepath.Join(t.TempDir(), "crash.img")
	var opts btrfs.Options
	ref := runWithLoss(t, base, work, &opts, nil, ops, lossPoint{}, false, rng)
	if ref.err != nil {
		t.Fatalf("transaction without a power loss: %v", ref.err)
	}
	if st := crashState(t, ref, check, before, after, "no loss"); st != "after" {
		t.Fatalf("transaction without a power loss left the %s state", st)
	}
	requireCleared(t, check)
	pts := dataLossPoints(ref.ops, rng, longTests())
	t.Logf("transaction made %d writes, %d syncs; trying %d loss points",
		ref.count[blockdev.OpWrite], ref.count[blockdev.OpSync], len(pts))
	states := map[string]int{}
	for i, lp := range pts {
		torn := i%2 == 1
		run := runWithLoss(t, base, work, &opts, nil, ops, lp, torn, rng)
		what := fmt.Sprintf("loss at %s %d (torn %v)", lp.op, lp.n, torn)
		if !run.lost || run.err == nil {
			t.Fatalf("%s: lost %v, transaction error %v", what, run.lost, run.err)
		}
		state := crashState(t, run, check, before, after, what)
		states[state]++
		st := spaceCacheState(t, check)
		switch {
		case state == "after" && (st.fst || st.cacheGen != 0 || st.headers != 0 || st.inodes != 0):
			t.Fatalf("%s: the new files, but the space cache %+v", what, st)
		case state == "before" && (st.fst || st.cacheGen == 0 || st.headers == 0):
			t.Fatalf("%s: the old files, but the space cache %+v", what, st)
		}
	}
	t.Logf("after the losses: %d times the old state, %d times the new", states["before"], states["after"])
	if states["before"] == 0 {
		t.Error("no power loss left the old state")
	}
}
