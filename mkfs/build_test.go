package mkfs

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// testSize is the image size of the build tests: room for the 20 MiB
// file with DUP data.
const testSize = 256 << 20

// buildImage runs Build into a new image under t.TempDir().
func buildImage(t *testing.T, open Opener, opts BuildOptions) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "img")
	if opts.Format.Size == 0 {
		opts.Format.Size = testSize
	}
	opts.PrePass = true
	if _, err := Build(img, open, opts); err != nil {
		t.Fatalf("Build: %v", err)
	}
	return img
}

// verify checks img with btrfs check (data checksums too), mounts it
// read-only and compares what the kernel shows with want.
func verify(t *testing.T, img string, want *btrfstest.Tree, dopts btrfstest.DiffOptions) {
	t.Helper()
	btrfstest.Check(t, []string{img}, true)
	mnt := btrfstest.Mount(t, "ro", img)
	got, err := btrfstest.Scan(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if d := btrfstest.Diff(want, got, dopts); len(d) > 0 {
		t.Errorf("image differs from the input:\n%s", strings.Join(d, "\n"))
	}
}

func dirOpener(dir string) Opener { return func() (Source, error) { return OpenDir(dir) } }

// testSeed is the seed of a randomized test: GOBTRFS_SEED to replay one,
// else the clock. It is logged.
func testSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GOBTRFS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GOBTRFS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (set GOBTRFS_SEED to replay)", seed)
	return seed
}

func TestBuildRootdir(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	src := t.TempDir()
	populateHost(t, src, seed)
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	img := buildImage(t, dirOpener(src), BuildOptions{CommitEntries: 7, CommitBytes: 4 << 20})
	verify(t, img, want, btrfstest.DiffOptions{CompareNlink: true})
}

func TestBuildRootdirProfiles(t *testing.T) {
	btrfstest.RequireInterop(t)
	src := t.TempDir()
	populateHost(t, src, 1)
	want, err := btrfstest.Scan(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, fo := range []Options{
		{NodeSize: 4096, DataProfile: "dup", MetadataProfile: "single"},
		{Csum: 3, NodeSize: 65536, Features: []string{"^no-holes"}},
	} {
		img := buildImage(t, dirOpener(src), BuildOptions{Format: fo})
		verify(t, img, want, btrfstest.DiffOptions{CompareNlink: true})
	}
}

func TestBuildCompress(t *testing.T) {
	btrfstest.RequireInterop(t)
	src := t.TempDir()
	populateHost(t, src, 2)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(src, "big"))) // random data; slow under -race
	must(os.WriteFile(filepath.Join(src, "compressible"), bytes.Repeat([]byte("gobtrfs mkfs "), 100000), 0o644))
	want, err := btrfstest.Scan(src)
	must(err)
	for _, c := range []struct {
		alg   string
		level int
	}{{"zstd", 0}, {"zlib", 9}, {"lzo", 0}, {"zstd", 15}} {
		t.Run(c.alg, func(t *testing.T) {
			img := buildImage(t, dirOpener(src), BuildOptions{Compress: c.alg, CompressLevel: c.level})
			verify(t, img, want, btrfstest.DiffOptions{CompareNlink: true})
		})
	}
}

// testTar is an archive with what a rootless image builder feeds mkfs:
// owners 1000:1000, device nodes, xattrs, hardlinks, directories only
// implied by paths, nanosecond times (pax) and a GNU-format member.
func testTar(t *testing.T) ([]tarMember, time.Time) {
	mt := time.Unix(1700000000, 123456789)
	big := make([]byte, 300000)
	for i := range big {
		big[i] = byte(i * 7 / 5)
	}
	return []tarMember{
		{hdr: tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt}},
		{hdr: tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, ModTime: mt.Add(time.Second),
			PAXRecords: map[string]string{"SCHILY.xattr.user.origin": "tar", "SCHILY.xattr.security.ima": "\x03\x02"}},
			data: "root:x:0:0::/root:/bin/sh\n"},
		{hdr: tar.Header{Name: "home/user/big", Typeflag: tar.TypeReg, Mode: 0o600, Uid: 1000, Gid: 1000, ModTime: mt}, data: string(big)},
		{hdr: tar.Header{Name: "home/user/", Typeflag: tar.TypeDir, Mode: 0o750, Uid: 1000, Gid: 1000, ModTime: mt}},
		{hdr: tar.Header{Name: "home/user/again", Typeflag: tar.TypeLink, Linkname: "home/user/big"}},
		{hdr: tar.Header{Name: "bin/su", Typeflag: tar.TypeReg, Mode: 0o4755, ModTime: mt}, data: "binary"},
		{hdr: tar.Header{Name: "bin/sh", Typeflag: tar.TypeSymlink, Linkname: "busybox", ModTime: mt, Uid: 1000, Gid: 1000}},
		{hdr: tar.Header{Name: "dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3, ModTime: mt}},
		{hdr: tar.Header{Name: "dev/vda", Typeflag: tar.TypeBlock, Mode: 0o660, Devmajor: 253, Devminor: 0, Gid: 6, ModTime: mt}},
		{hdr: tar.Header{Name: "run/fifo", Typeflag: tar.TypeFifo, Mode: 0o620, ModTime: mt}},
		{hdr: tar.Header{Name: "gnu/old", Typeflag: tar.TypeReg, Mode: 0o444, ModTime: time.Unix(1000000000, 0), Format: tar.FormatGNU}, data: "gnu"},
		{hdr: tar.Header{Name: "empty", Typeflag: tar.TypeReg, Mode: 0o644, ModTime: mt}},
	}, mt
}

// expectTar is the tree a build of ms shows: implied directories are
// 0755 root-owned with the build time now.
func expectTar(ms []tarMember, now time.Time) *btrfstest.Tree {
	tr := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{}}
	dir := func(p string) {
		if tr.Entries[p] == nil {
			tr.Entries[p] = &btrfstest.Entry{Path: p, Type: btrfstest.TypeDir, Perm: 0o755, MtimeNs: now.UnixNano()}
		}
	}
	dir(".")
	types := map[byte]btrfstest.FileType{tar.TypeReg: btrfstest.TypeRegular, tar.TypeDir: btrfstest.TypeDir,
		tar.TypeSymlink: btrfstest.TypeSymlink, tar.TypeChar: btrfstest.TypeCharDev,
		tar.TypeBlock: btrfstest.TypeBlockDev, tar.TypeFifo: btrfstest.TypeFifo}
	for _, m := range ms {
		p, _ := CleanPath(m.hdr.Name)
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			dir(d)
		}
		if m.hdr.Typeflag == tar.TypeLink {
			tr.Links = append(tr.Links, []string{m.hdr.Linkname, p})
			c := *tr.Entries[m.hdr.Linkname]
			c.Path = p
			tr.Entries[p] = &c
			continue
		}
		e := &btrfstest.Entry{Path: p, Type: types[m.hdr.Typeflag], Perm: uint32(m.hdr.Mode),
			UID: uint32(m.hdr.Uid), GID: uint32(m.hdr.Gid), MtimeNs: m.hdr.ModTime.UnixNano(),
			Target: m.hdr.Linkname, RdevMajor: uint32(m.hdr.Devmajor), RdevMinor: uint32(m.hdr.Devminor)}
		if e.Type == btrfstest.TypeSymlink {
			e.Perm = 0o777
		}
		if e.Type == btrfstest.TypeRegular {
			sum := sha256.Sum256([]byte(m.data))
			e.SHA256, e.Size = hex.EncodeToString(sum[:]), int64(len(m.data))
			if len(m.data) > 0 {
				e.Data = []btrfstest.Range{{Off: 0, Len: int64(len(m.data))}}
			}
		}
		for k, v := range m.hdr.PAXRecords {
			if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
				if e.Xattrs == nil {
					e.Xattrs = map[string]string{}
				}
				e.Xattrs[name] = v
			}
		}
		tr.Entries[p] = e
	}
	return tr
}

func tarOpener(b []byte) Opener {
	return func() (Source, error) { return NewTarSource(bytes.NewReader(b)), nil }
}

func TestBuildTar(t *testing.T) {
	btrfstest.RequireInterop(t)
	ms, _ := testTar(t)
	b := makeTar(t, ms)
	now := time.Unix(1750000000, 0)
	img := buildImage(t, tarOpener(b), BuildOptions{Format: Options{Time: now}})
	verify(t, img, expectTar(ms, now), btrfstest.DiffOptions{})
}

func TestBuildTarOverrides(t *testing.T) {
	btrfstest.RequireInterop(t)
	ms, _ := testTar(t)
	b := makeTar(t, ms)
	now := time.Unix(1750000000, 0)
	chmod, err := ParseChmod("D755,Fgo-w,Fa+r")
	if err != nil {
		t.Fatal(err)
	}
	img := buildImage(t, tarOpener(b), BuildOptions{Format: Options{Time: now}, Owner: &Owner{UID: 7, GID: 8}, Chmod: "D755,Fgo-w,Fa+r"})
	want := expectTar(ms, now)
	for _, e := range want.Entries {
		e.UID, e.GID = 7, 8
		switch e.Type {
		case btrfstest.TypeDir:
			e.Perm = 0o755
		case btrfstest.TypeSymlink:
		default:
			e.Perm = chmod(KindFile, e.Perm)
		}
	}
	verify(t, img, want, btrfstest.DiffOptions{})
}

func TestBuildReproducible(t *testing.T) {
	ms, _ := testTar(t)
	b := makeTar(t, ms)
	epoch := time.Unix(1690000000, 0) // after gnu/old, before the rest
	opts := BuildOptions{Epoch: epoch}
	a := buildImage(t, tarOpener(b), opts)
	c := buildImage(t, tarOpener(b), opts)
	ab, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := os.ReadFile(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab, cb) {
		t.Fatal("two reproducible builds of one input differ")
	}
	ms[1].data = "changed"
	d := buildImage(t, tarOpener(makeTar(t, ms)), opts)
	db, err := os.ReadFile(d)
	if err != nil {
		t.Fatal(err)
	}
	const fsidAt = 0x10000 + 0x20
	if bytes.Equal(ab[fsidAt:fsidAt+16], db[fsidAt:fsidAt+16]) {
		t.Error("different inputs gave the same fsid")
	}
	if btrfstest.Interop() {
		// Times newer than the epoch are clamped to it.
		mnt := btrfstest.Mount(t, "ro", a)
		st, err := os.Lstat(filepath.Join(mnt, "etc/passwd"))
		if err != nil {
			t.Fatal(err)
		}
		if !st.ModTime().Equal(epoch) {
			t.Errorf("etc/passwd mtime %v, want the epoch %v", st.ModTime(), epoch)
		}
		if st, err := os.Lstat(filepath.Join(mnt, "gnu/old")); err != nil || st.ModTime().Unix() != 1000000000 {
			t.Errorf("gnu/old: an mtime before the epoch must stay: %v", err)
		}
	}
}

// TestBuildReproducibleDir builds a host tree (holes, a 20 MiB file,
// hardlinks, devices) twice with compression, whose pieces are compressed
// in parallel, and wants identical bytes.
func TestBuildReproducibleDir(t *testing.T) {
	src := t.TempDir()
	populateHost(t, src, 3)
	opts := BuildOptions{Reproducible: true, Compress: "zstd", CommitEntries: 5}
	var imgs [2][]byte
	for i := range imgs {
		b, err := os.ReadFile(buildImage(t, dirOpener(src), opts))
		if err != nil {
			t.Fatal(err)
		}
		imgs[i] = b
	}
	if !bytes.Equal(imgs[0], imgs[1]) {
		t.Fatal("two reproducible builds of one directory differ")
	}
}

func TestBuildErrors(t *testing.T) {
	long := strings.Repeat("n", 256)
	cases := []struct {
		name string
		ms   []tarMember
		opts BuildOptions
		is   error
		path string
	}{
		{"long name", []tarMember{{hdr: tar.Header{Name: "ok", Typeflag: tar.TypeReg}}, {hdr: tar.Header{Name: "d/" + long, Typeflag: tar.TypeReg}}},
			BuildOptions{}, ErrInput, long},
		{"long target", []tarMember{{hdr: tar.Header{Name: "s", Typeflag: tar.TypeSymlink, Linkname: strings.Repeat("t", 4000)}}},
			BuildOptions{Format: Options{NodeSize: 4096}}, ErrInput, `"s"`},
		{"dotdot", []tarMember{{hdr: tar.Header{Name: "a/../../etc", Typeflag: tar.TypeDir}}},
			BuildOptions{}, ErrInput, "a/../../etc"},
		{"subvol", nil, BuildOptions{Subvolumes: []string{"../home"}}, ErrInput, "home"},
		{"compress", nil, BuildOptions{Compress: "lz4"}, ErrUnsupported, "lz4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "img")
			c.opts.PrePass, c.opts.Format.Size = true, testSize
			_, err := Build(img, tarOpener(makeTar(t, c.ms)), c.opts)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.path) {
				t.Fatalf("err %v, want %v naming %q", err, c.is, c.path)
			}
			if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("image written before the error: %v", err)
			}
		})
	}
	// Reproducible without a pre-pass has nothing to derive UUIDs from.
	img := filepath.Join(t.TempDir(), "img")
	if _, err := Build(img, tarOpener(makeTar(t, nil)), BuildOptions{Reproducible: true, Format: Options{Size: testSize}}); err == nil {
		t.Error("reproducible build without pre-pass or seed: no error")
	}
	// Errors found while writing (no pre-pass) still name the entry.
	ms := []tarMember{{hdr: tar.Header{Name: "f", Typeflag: tar.TypeReg}}, {hdr: tar.Header{Name: "f/x", Typeflag: tar.TypeReg}}}
	_, err := Build(img, tarOpener(makeTar(t, ms)), BuildOptions{Format: Options{Size: testSize}})
	if err == nil || !strings.Contains(err.Error(), `"f/x"`) {
		t.Errorf("file under a file: err %v, want one naming \"f/x\"", err)
	}
}

// TestBuildEmptyInput builds from an input with only the root.
func TestBuildEmptyInput(t *testing.T) {
	btrfstest.RequireInterop(t)
	now := time.Unix(1750000000, 0)
	img := buildImage(t, tarOpener(makeTar(t, nil)), BuildOptions{Format: Options{Time: now}})
	verify(t, img, expectTar(nil, now), btrfstest.DiffOptions{})
}
