package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
)

// The tests of this file are the acceptance test of dump-tree and
// dump-super: they make images with mkfs.btrfs and with the kernel, and
// compare the commands' standard output with btrfs-progs', byte for byte,
// for the default output and for many option variants.

// runOurs runs one of our commands and returns its standard output and
// error.
func runOurs(ctor func() *cobra.Command, args ...string) (string, error) {
	cmd := ctor()
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

// runProgs runs `btrfs inspect-internal args...` and returns its standard
// output and exit status.
func runProgs(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("btrfs", append([]string{"inspect-internal"}, args...)...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("btrfs %v: %v", args, err)
	}
	return out.String(), 0
}

// variant is one way of calling dump-tree: our arguments and progs'.
type variant struct{ ours, progs []string }

func same(args ...string) variant { return variant{args, args} }

// treeVariants lists the dump-tree option sets compared on every image;
// blocks are tree roots of the image for the -b variants.
func treeVariants(blocks []string) []variant {
	vs := []variant{
		same(), same("--dfs"), same("--bfs"), same("--hide-names"), same("--csum-items"), same("--csum-headers"),
		same("-e"), {[]string{"--device-tree"}, []string{"-d"}}, same("-r"), same("-R"), same("-u"), same("--noscan"),
	}
	for _, tr := range []string{"root", "chunk", "extent", "dev", "device", "fs", "csum", "checksum", "quota", "uuid",
		"free_space", "data_reloc", "tree_log", "tree_reloc", "5", "11", "256", "257", "258", "259", "1000"} {
		vs = append(vs, same("-t", tr))
	}
	vs = append(vs, same("-t", "fs", "--dfs"), same("-t", "extent", "-e"), same("-b", "12345"), same("-b", "1048576"),
		same("-b", "13631488", "-b", "12345", "--follow"))
	for _, b := range blocks {
		vs = append(vs, same("-b", b), same("-b", b, "--follow"), same("-b", b, "--follow", "--dfs"))
	}
	if len(blocks) > 1 {
		vs = append(vs, same("-b", blocks[0], "-b", blocks[1]))
	}
	return vs
}

// rootBlocks returns the root block addresses of the image's trees.
func rootBlocks(t *testing.T, devs []string) []string {
	t.Helper()
	fsys, err := btrfs.Open(devs[0], &btrfs.Options{Devices: devs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	sb := fsview.Of(fsys).Superblock()
	out := []string{strconv.FormatUint(uint64(sb.Root), 10), strconv.FormatUint(uint64(sb.ChunkRoot), 10)}
	trees, err := fsview.Of(fsys).Trees()
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trees {
		if tr.ID == disk.FSTreeObjectID || tr.ID == disk.CsumTreeObjectID || tr.ID == disk.ExtentTreeObjectID {
			out = append(out, strconv.FormatUint(uint64(tr.Root.Addr), 10))
		}
	}
	return out
}

// compareTree compares dump-tree on devs for one variant.
func compareTree(t *testing.T, devs []string, v variant) {
	t.Helper()
	args := append([]string{}, v.ours...)
	for _, d := range devs[1:] {
		args = append(args, "-d", d)
	}
	got, err := runOurs(NewDumpTreeCommand, append(args, devs[0])...)
	want, code := runProgs(t, append(append([]string{"dump-tree"}, v.progs...), devs...)...)
	if d := btrfstest.LineDiff(want, got); d != "" {
		t.Errorf("dump-tree %s: output differs from btrfs-progs (-want +got):\n%s", strings.Join(v.ours, " "), d)
	}
	if (err != nil) != (code != 0) {
		t.Errorf("dump-tree %s: error %v, btrfs-progs exit status %d", strings.Join(v.ours, " "), err, code)
	}
}

// compareSuper compares dump-super with the same arguments.
func compareSuper(t *testing.T, args ...string) {
	t.Helper()
	got, err := runOurs(NewDumpSuperCommand, args...)
	want, code := runProgs(t, append([]string{"dump-super"}, args...)...)
	if d := btrfstest.LineDiff(want, got); d != "" {
		t.Errorf("dump-super %s: output differs from btrfs-progs (-want +got):\n%s", strings.Join(args, " "), d)
	}
	if (err != nil) != (code != 0) {
		t.Errorf("dump-super %s: error %v, btrfs-progs exit status %d", strings.Join(args, " "), err, code)
	}
}

// compareAll compares every dump-tree variant and dump-super on an image,
// after checking that the image holds each of the strings in must (item
// types the image is meant to exercise).
func compareAll(t *testing.T, devs []string, must ...string) {
	t.Helper()
	args := []string{"dump-tree"}
	full, _ := runProgs(t, append(args, devs...)...)
	for _, m := range must {
		if !strings.Contains(full, m) {
			t.Errorf("the image does not exercise %q", m)
		}
	}
	if os.Getenv("GOBTRFS_DUMP_KEEP") != "" {
		_ = os.WriteFile(filepath.Join(os.Getenv("GOBTRFS_DUMP_KEEP"), strings.ReplaceAll(t.Name(), "/", "_")+".txt"), []byte(full), 0o644)
	}
	for _, v := range treeVariants(rootBlocks(t, devs)) {
		compareTree(t, devs, v)
	}
	for _, d := range devs {
		compareSuper(t, "-f", d)
		compareSuper(t, "-a", "-f", d)
		compareSuper(t, "-s", "1", d)
	}
}

// populateHost fills dir (on the host filesystem) for mkfs --rootdir:
// small and inline-sized files, a big file, hardlinks, symlinks, xattrs
// when the host supports them, a fifo and nested directories.
func populateHost(t *testing.T, dir string, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755))
	for i, n := range []int{0, 1, 100, 2048, 3000, 4095, 4096, 4097, 65536, 300000} {
		must(os.WriteFile(filepath.Join(dir, "a", fmt.Sprintf("f%d", i)), data(n), 0o644))
	}
	must(os.WriteFile(filepath.Join(dir, "big"), data(24<<20), 0o600))
	must(os.WriteFile(filepath.Join(dir, "a/b/c/text"), bytes.Repeat([]byte("hello btrfs "), 1000), 0o644))
	for i := range 5 {
		must(os.Link(filepath.Join(dir, "a/f2"), filepath.Join(dir, fmt.Sprintf("a/b/link%d", i))))
	}
	must(os.Symlink("a/f3", filepath.Join(dir, "sym")))
	must(os.Symlink(strings.Repeat("long/", 200), filepath.Join(dir, "a/longsym")))
	must(unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	for i := range 40 {
		must(os.WriteFile(filepath.Join(dir, "a/b", fmt.Sprintf("name-%03d-%s", i, strings.Repeat("x", i*5))), data(i*10), 0o644))
	}
	// At most one block of xattrs fits an ext4 inode: keep them small.
	for i := range 20 {
		err := unix.Setxattr(filepath.Join(dir, "a/f1"), fmt.Sprintf("user.attr%02d", i), data(i*8), 0)
		if err != nil {
			t.Logf("host filesystem takes no more xattrs: %v", err)
			break
		}
	}
}

// TestDumpMkfsImages compares the commands with btrfs-progs on images made
// by mkfs.btrfs: node sizes, checksum types, profiles, features, and
// --rootdir with files of every kind.
func TestDumpMkfsImages(t *testing.T) {
	btrfstest.RequireProgs(t)
	root := t.TempDir()
	populateHost(t, root, 1)
	cases := []struct {
		name string
		opts btrfstest.MkfsOptions
		must []string
	}{
		{"default", btrfstest.MkfsOptions{}, nil},
		{"4k", btrfstest.MkfsOptions{NodeSize: 4096, RootDir: root}, []string{"node ", "XATTR_ITEM", "inline extent data size"}},
		{"64k", btrfstest.MkfsOptions{NodeSize: 65536, RootDir: root}, nil},
		{"xxhash", btrfstest.MkfsOptions{Csum: "xxhash", RootDir: root}, nil},
		{"sha256", btrfstest.MkfsOptions{Csum: "sha256", RootDir: root}, nil},
		{"blake2", btrfstest.MkfsOptions{Csum: "blake2", NodeSize: 4096, RootDir: root}, nil},
		{"single", btrfstest.MkfsOptions{MetadataProfile: "single", DataProfile: "single", RootDir: root}, nil},
		{"dup", btrfstest.MkfsOptions{MetadataProfile: "dup", DataProfile: "dup", RootDir: root}, []string{"DATA|DUP"}},
		{"mixed", btrfstest.MkfsOptions{Extra: []string{"--mixed"}, RootDir: root}, []string{"DATA|METADATA|single"}},
		{"old-format", btrfstest.MkfsOptions{Features: "^skinny-metadata,^no-holes,^extref", Extra: []string{"-R", "^free-space-tree"}, RootDir: root},
			[]string{"tree block key", "EXTENT_ITEM"}},
		{"label", btrfstest.MkfsOptions{Label: "a label\twith tab", RootDir: root}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compareAll(t, []string{btrfstest.Mkfs(t, tc.opts)}, tc.must...)
		})
	}
}

// TestDumpBlockGroupTree compares the commands with btrfs-progs on an
// image made by mkfs.btrfs 6.19 (block-group tree on) and filled by the
// kernel: `-t 11` prints the tree from its own root, as progs does.
func TestDumpBlockGroupTree(t *testing.T) {
	btrfstest.RequireProgs(t)
	compareAll(t, []string{btrfstest.OpenFixture(t, "kernel-bgt-16k-crc32c")}, "block group tree key (BLOCK_GROUP_TREE ROOT_ITEM 0)")
}

// TestDumpMultiDevice compares a two-device raid1 filesystem, named to
// progs as two devices and to gobtrfs with -d.
func TestDumpMultiDevice(t *testing.T) {
	btrfstest.RequireProgs(t)
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{MetadataProfile: "raid1", DataProfile: "raid1"})
	compareAll(t, devs)
}

// TestDumpSuperOptions compares dump-super's copy selection and error
// behaviour: -a, -s, --bytenr, -F, several devices, bad magic, missing
// copies and unreadable files.
func TestDumpSuperOptions(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	small := filepath.Join(t.TempDir(), "small.img")
	if err := os.WriteFile(small, make([]byte, 70<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.img")
	for _, args := range [][]string{
		{img}, {"-f", img}, {"-a", img}, {"-s", "0", img}, {"-s", "1", "-f", img}, {"-s", "2", img},
		{"--bytenr", "65536", img}, {"--bytenr", "4096", img}, {"-F", "--bytenr", "4096", img},
		{"-F", "-f", "--bytenr", "4096", img}, {"-s", "65536", img}, {img, img}, {"-a", img, img},
		{small}, {"-F", small}, {"-a", small}, {img, small, img}, {missing}, {img, missing},
	} {
		compareSuper(t, args...)
	}
}

// TestParseTreeID checks the tree names -t accepts.
func TestParseTreeID(t *testing.T) {
	for s, want := range map[string]disk.ObjectID{
		"root": 1, "ROOT_TREE": 1, "extent": 2, "chunk": 3, "dev": 4, "device": 4, "dev_tree": 4, "fs": 5,
		"FS_TREE": 5, "BTRFS_FS_TREE_OBJECTID": 5, "csum": 7, "checksum": 7, "quota": 8, "uuid": 9,
		"free_space": 10, "free-space": 10, "free-space-tree": 10, "block-group": 11, "tree_log": disk.TreeLogObjectID,
		"tree-log-fixup": disk.TreeLogFixupObjectID, "tree_reloc": disk.TreeRelocObjectID,
		"data-reloc": disk.DataRelocTreeObjectID, "256": 256, "005": 5,
	} {
		if got, err := ParseTreeID(s); err != nil || got != want {
			t.Errorf("ParseTreeID(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "foo", "fsx", "-1", "0x5", "checksums", "log"} {
		if got, err := ParseTreeID(s); err == nil {
			t.Errorf("ParseTreeID(%q) = %d, want an error", s, got)
		}
	}
}

// TestDumpJSON checks the JSON forms: every line parses, the blocks are
// the blocks of the text form in the same order, trees and totals are
// announced, and dump-super gives one object per copy.
func TestDumpJSON(t *testing.T) {
	btrfstest.RequireProgs(t)
	root := t.TempDir()
	populateHost(t, root, 3)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096, RootDir: root})
	for _, args := range [][]string{{}, {"-t", "fs"}, {"-r"}, {"-R"}, {"-e"}, {"--hide-names", "--csum-items"}} {
		text, err := runOurs(NewDumpTreeCommand, append(append([]string{}, args...), img)...)
		if err != nil {
			t.Fatal(err)
		}
		js, err := runOurs(NewDumpTreeCommand, append(append([]string{"--json"}, args...), img)...)
		if err != nil {
			t.Fatal(err)
		}
		var textBlocks []string
		for _, l := range strings.Split(text, "\n") {
			f := strings.Fields(l)
			if len(f) > 2 && (f[0] == "leaf" || f[0] == "node") && f[2] != "flags" {
				textBlocks = append(textBlocks, f[1])
			}
		}
		var jsonBlocks []string
		records := map[string]int{}
		for i, l := range strings.Split(strings.TrimSuffix(js, "\n"), "\n") {
			var rec struct {
				Record string `json:"record"`
				Bytenr uint64 `json:"bytenr"`
			}
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("%v: line %d: %v: %q", args, i+1, err, l)
			}
			records[rec.Record]++
			if rec.Record == "block" {
				jsonBlocks = append(jsonBlocks, strconv.FormatUint(rec.Bytenr, 10))
			}
		}
		if strings.Join(textBlocks, ",") != strings.Join(jsonBlocks, ",") {
			t.Errorf("%v: JSON blocks %v, text blocks %v", args, jsonBlocks, textBlocks)
		}
		if records["tree"] == 0 {
			t.Errorf("%v: no tree records: %v", args, records)
		}
	}
	js, err := runOurs(NewDumpSuperCommand, "--json", "-a", img)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(js), "\n")
	if len(lines) != 2 {
		t.Fatalf("dump-super --json -a: %d lines, want 2 (copies 0 and 1)", len(lines))
	}
	for _, l := range lines {
		var sb struct {
			CsumMatch  bool `json:"csum_match"`
			MagicMatch bool `json:"magic_match"`
			SysChunks  []any
			Backups    []any `json:"backup_roots"`
		}
		if err := json.Unmarshal([]byte(l), &sb); err != nil {
			t.Fatal(err)
		}
		if !sb.CsumMatch || !sb.MagicMatch || len(sb.Backups) != 4 {
			t.Errorf("dump-super --json: %s", l)
		}
	}
}

// TestDumpHelp checks that both commands document themselves.
func TestDumpHelp(t *testing.T) {
	for _, ctor := range []func() *cobra.Command{NewDumpTreeCommand, NewDumpSuperCommand} {
		out, err := runOurs(ctor, "--help")
		if err != nil {
			t.Fatal(err)
		}
		cmd := ctor()
		if cmd.Short == "" || cmd.Long == "" {
			t.Errorf("%s: missing help text", cmd.Name())
		}
		for _, flag := range []string{"--json"} {
			if !strings.Contains(out, flag) {
				t.Errorf("%s --help does not mention %s", cmd.Name(), flag)
			}
		}
	}
}

// TestDumpDamagedItems damages an item of the fs tree (an INODE_REF whose
// name length overruns it, which the filesystem's tree-checker refuses)
// and checks that dump-tree still prints it exactly as btrfs-progs does.
func TestDumpDamagedItems(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	trees, err := fsview.Of(fsys).Trees()
	if err != nil {
		t.Fatal(err)
	}
	var addr disk.LogicalAddr
	for _, tr := range trees {
		if tr.ID == disk.FSTreeObjectID {
			addr = tr.Root.Addr
		}
	}
	n, err := fsview.Of(fsys).ReadBlockAt(addr)
	if err != nil {
		t.Fatal(err)
	}
	block := bytes.Clone(n)
	mp, err := fsview.Of(fsys).ChunkMap().Mirrors(addr, uint64(len(block)))
	if err != nil {
		t.Fatal(err)
	}
	csum := fsview.Of(fsys).Superblock().CsumType
	fsys.Close()
	patched := false
	for i := 0; i < disk.Node(block).NumItems(); i++ {
		it := disk.Node(block).ItemHeader(i)
		if it.Key.Type == disk.InodeRefKey {
			off := disk.HeaderSize + int(it.Offset) + 8
			block[off], block[off+1] = 0x2c, 0x01 // name_len 300
			patched = true
		}
	}
	if !patched {
		t.Fatal("no INODE_REF in the fs tree root")
	}
	csum.SumBlock(block)
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range mp.Copies {
		if _, err := f.WriteAt(block, int64(l.Physical)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if fsys, err := btrfs.Open(img, nil); err == nil {
		_, err = fsview.Of(fsys).ReadBlockAt(addr)
		fsys.Close()
		if err == nil {
			t.Error("the filesystem's reader accepts the damaged block: the test damages nothing it checks")
		}
	}
	a := strconv.FormatUint(uint64(addr), 10)
	for _, v := range []variant{same(), same("-t", "fs"), same("-b", a), same("--hide-names")} {
		compareTree(t, []string{img}, v)
	}
}
