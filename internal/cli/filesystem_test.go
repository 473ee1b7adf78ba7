package cli

import (
	"bytes"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// populateDu fills img with what du tells apart: plain, compressed,
// inline, reflinked, hard-linked and preallocated data, holes, and a
// subvolume.
func populateDu(t *testing.T, img string) {
	t.Helper()
	fsys, err := btrfs.OpenWritable(img, &btrfs.Options{Compress: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	rnd := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(rnd)
	text := bytes.Repeat([]byte("compressible text "), 40000)
	if _, err := fsys.CreateSubvolume("sv", nil); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		fsys.Mkdir("d", 0o755),
		fsys.WriteFile("d/random", rnd, 0o644),
		fsys.WriteFile("d/text", text, 0o644),
		fsys.WriteFile("small", []byte("inline\n"), 0o644),
		fsys.WriteFile("sv/in-subvolume", rnd[:300<<10], 0o644),
		fsys.CreateEmpty("clone", 0o644),
		fsys.Clone("d/random", 128<<10, "clone", 0, 256<<10),
		fsys.Link("d/text", "hardlink"),
		fsys.CreateEmpty("prealloc", 0o644),
		fsys.Fallocate("prealloc", 0, 64<<10, false),
		fsys.CreateEmpty("sparse", 0o644),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	if _, err := fsys.WriteAt("sparse", rnd[:8192], 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFilesystemVerbs compares filesystem show with btrfs-progs on the
// image file (and on a loop device of it, where only the path differs),
// and df and du with btrfs-progs on the kernel's mount.
func TestFilesystemVerbs(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{Label: "fs verbs"})
	populateDu(t, img)
	btrfstest.Check(t, []string{img}, true)

	for _, opts := range [][]string{nil, {"--raw"}, {"--si"}, {"--kbytes"}} {
		ours := ok(t, append(append([]string{"filesystem", "show"}, opts...), img)...)
		want := progs(t, "btrfs", append(append([]string{"filesystem", "show"}, opts...), img)...)
		if ours != want {
			t.Errorf("filesystem show %v differs:\nbtrfs-progs:\n%s\ngobtrfs:\n%s", opts, want, ours)
		}
	}
	loop := btrfstest.AttachReadOnly(t, img)
	want := strings.ReplaceAll(progs(t, "btrfs", "filesystem", "show", loop), "path "+loop, "path "+canonicalPath(img))
	if ours := ok(t, "filesystem", "show", img); ours != want {
		t.Errorf("filesystem show differs from progs' on a loop device (path mapped):\nbtrfs-progs:\n%s\ngobtrfs:\n%s", want, ours)
	}
	btrfstest.Detach(t, loop)
	nolabel := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	if ours, want := ok(t, "filesystem", "show", nolabel), progs(t, "btrfs", "filesystem", "show", nolabel); ours != want {
		t.Errorf("filesystem show without a label differs:\nbtrfs-progs:\n%s\ngobtrfs:\n%s", want, ours)
	}

	mnt := btrfstest.Mount(t, "ro,subvolid=5", img)
	for _, opts := range [][]string{nil, {"-b"}, {"-H"}, {"-k"}} {
		ours := ok(t, append(append([]string{"filesystem", "df"}, opts...), img)...)
		want := progs(t, "btrfs", append(append([]string{"filesystem", "df"}, opts...), mnt)...)
		if ours != want {
			t.Errorf("filesystem df %v differs:\nbtrfs-progs:\n%s\ngobtrfs:\n%s", opts, want, ours)
		}
	}
	for _, c := range []struct {
		opts  []string
		paths []string
	}{
		{nil, []string{""}}, {[]string{"-s"}, []string{""}}, {[]string{"--raw"}, []string{""}},
		{[]string{"-s", "--raw"}, []string{"/d", "/clone", "/sv"}}, {nil, []string{"/d"}},
	} {
		args := append([]string{"filesystem", "du"}, c.opts...)
		pargs := append([]string{"filesystem", "du"}, c.opts...)
		for _, p := range c.paths {
			args = append(args, img+":"+p)
			pargs = append(pargs, mnt+p)
		}
		ours := ok(t, args...)
		want := strings.ReplaceAll(progs(t, "btrfs", pargs...), mnt, img+":")
		if ours != want {
			t.Errorf("filesystem du %v %v differs:\nbtrfs-progs (paths mapped):\n%s\ngobtrfs:\n%s", c.opts, c.paths, want, ours)
		}
	}
	btrfstest.Unmount(t, mnt)
	if _, err := os.Stat(img); err != nil {
		t.Fatal(err)
	}
}
