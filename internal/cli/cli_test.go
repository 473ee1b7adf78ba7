package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(args, strings.NewReader(""), &o, &e)
	return o.String(), e.String(), code
}

func TestHelpEverywhere(t *testing.T) {
	root := newRootCommand()
	for _, c := range root.Commands() {
		args := []string{c.Name(), "--help"}
		out, _, code := run(t, args...)
		if code != ExitOK || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
		for _, sub := range c.Commands() {
			args := []string{c.Name(), sub.Name(), "--help"}
			out, _, code := run(t, args...)
			if code != ExitOK || !strings.Contains(out, "Usage:") {
				t.Errorf("%v: exit %d, output %q", args, code, out)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"nosuch"}, {"ls"}, {"ls", "--nosuchflag", "x"}, {"extract", "only-one"}} {
		if _, _, code := run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
	if _, stderr, code := run(t, "ls", "/nonexistent/image"); code != ExitFailure || stderr == "" {
		t.Errorf("ls of a missing image: exit %d, stderr %q", code, stderr)
	}
}

func TestReadCommands(t *testing.T) {
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c")
	out, _, code := run(t, "ls", "-l", img)
	if code != 0 || !strings.Contains(out, "symlink -> regular") || !strings.Contains(out, "-rwsr-xr-x") {
		t.Errorf("ls -l: exit %d\n%s", code, out)
	}
	out, _, code = run(t, "ls", "-R", img+":/a")
	if code != 0 || !strings.Contains(out, "linked") {
		t.Errorf("ls -R IMAGE:/a: exit %d\n%s", code, out)
	}
	out, _, code = run(t, "cat", img+":a/linked")
	if code != 0 || len(out) != 3000 {
		t.Errorf("cat: exit %d, %d bytes", code, len(out))
	}
	out, _, code = run(t, "info", "--json", img)
	var info btrfs.Info
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.NodeSize != 16384 || len(info.BlockGroups) == 0 {
		t.Errorf("info --json: exit %d\n%s", code, out)
	}
	out, _, code = run(t, "subvolume", "list", img)
	if code != 0 {
		t.Errorf("subvolume list: exit %d\n%s", code, out)
	}
}

func TestSubvolumeListOnKernelImage(t *testing.T) {
	img := btrfstest.OpenFixture(t, "kernel-16k-crc32c")
	out, _, code := run(t, "subvolume", "list", img)
	if code != 0 || !strings.Contains(out, "top level 5 path ") {
		t.Errorf("subvolume list: exit %d\n%s", code, out)
	}
}

func TestExtractGoesOnPastDamage(t *testing.T) {
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c")
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := fsys.Info()
	if err != nil {
		t.Fatal(err)
	}
	// Damage every used data sector: every file with data becomes
	// unreadable; directories, links and special files are not.
	m := fsview.Of(fsys).ChunkMap()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, bg := range info.BlockGroups {
		if bg.Type != "DATA" || bg.Used == 0 {
			continue
		}
		for l := bg.Start; l < bg.Start+bg.Length; l += 4096 {
			mp, err := m.Mirrors(disk.LogicalAddr(l), 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range mp.Copies {
				b := []byte{0}
				f.ReadAt(b, int64(c.Physical)+7)
				b[0] ^= 0xff
				f.WriteAt(b, int64(c.Physical)+7)
			}
		}
	}
	f.Close()
	fsys.Close()
	dst := filepath.Join(t.TempDir(), "out")
	_, stderr, code := run(t, "extract", "-q", img, dst)
	if code != ExitFailure {
		t.Fatalf("extract of a damaged image: exit %d, want %d\n%s", code, ExitFailure, stderr)
	}
	if !strings.Contains(stderr, "regular") || !strings.Contains(stderr, "checksum mismatch") {
		t.Errorf("stderr does not name the damaged file and the cause:\n%s", stderr)
	}
	if target, err := os.Readlink(filepath.Join(dst, "symlink")); err != nil || target != "regular" {
		t.Errorf("symlink not extracted past the damage: %q %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "empty")); err != nil {
		t.Errorf("empty file not extracted past the damage: %v", err)
	}
}

func TestDemo(t *testing.T) {
	out, stderr, code := run(t, "demo", "--out", filepath.Join(t.TempDir(), "demo"))
	if code != 0 || !strings.Contains(out, "extracted") {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, stderr)
	}
	// The image the demo lists stays for the commands it suggests.
	first, _, _ := strings.Cut(out, "\n")
	img, ok := strings.CutPrefix(first, "$ gobtrfs ls -lR ")
	if !ok {
		t.Fatalf("first line %q", first)
	}
	defer os.RemoveAll(filepath.Dir(img))
	if !strings.Contains(out, "gobtrfs cat "+img+":/regular\n") {
		t.Errorf("demo does not suggest commands on its image:\n%s", out)
	}
	if got, stderr, code := run(t, "cat", img+":/regular"); code != ExitOK || got == "" {
		t.Errorf("cat on the demo's image: exit %d, %s", code, stderr)
	}
}

func TestSplitImagePath(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "a:b.img")
	os.WriteFile(img, nil, 0o644)
	for _, c := range []struct{ in, image, path string }{
		{img, img, "."},
		{img + ":", img, "."},
		{img + ":/etc//passwd", img, "etc/passwd"},
		{img + ":x:y", img, "x:y"},
		{"missing", "missing", "."},
		{"missing.img:/etc", "missing.img", "etc"}, // misspelled: opening it says it is missing
		{"C:", "C:", "."},
	} {
		i, p := splitImagePath(c.in)
		if i != c.image || p != c.path {
			t.Errorf("splitImagePath(%q) = %q, %q; want %q, %q", c.in, i, p, c.image, c.path)
		}
	}
}
