package btrfstest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

func format(t testing.TB, tr *btrfstest.Tree) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := tr.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestManifestRoundTrip(t *testing.T) {
	want := sampleTree()
	text := format(t, want)
	got, err := btrfstest.Parse(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("round trip changed the tree (-want +got):\n%s\nmanifest:\n%s", d, text)
	}
	if again := format(t, got); !bytes.Equal(again, text) {
		t.Fatalf("format not stable:\n%s\nvs\n%s", text, again)
	}
	// Save/Load go through the same code via a file.
	path := t.TempDir() + "/m"
	if err := want.Save(path); err != nil {
		t.Fatal(err)
	}
	if got, err := btrfstest.Load(path); err != nil || cmp.Diff(want, got) != "" {
		t.Fatalf("Load(Save(x)) != x: %v", err)
	}
}

// TestManifestGolden pins the format: a change of spelling breaks every
// committed manifest and must be a deliberate version bump.
func TestManifestGolden(t *testing.T) {
	tr := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{
		".": {Path: ".", Type: btrfstest.TypeDir, Ino: 256, Perm: 0o755, Nlink: 1, Size: 12, MtimeNs: -1},
		"f": {Path: "f", Type: btrfstest.TypeRegular, Ino: 257, Perm: 0o4644, UID: 1, GID: 2, Nlink: 2, Size: 5,
			MtimeNs: 1700000000123456789, SHA256: strings.Repeat("0f", 32), Data: []btrfstest.Range{{Off: 0, Len: 5}},
			Xattrs: map[string]string{"user.b": "\x00", "user.a": "é"}},
		"g": {Path: "g", Type: btrfstest.TypeRegular, Nlink: 2, SHA256: strings.Repeat("0f", 32)},
		"l": {Path: "l", Type: btrfstest.TypeSymlink, Perm: 0o777, Nlink: 1, Size: 3, Target: "a b"},
		"n": {Path: "n", Type: btrfstest.TypeCharDev, Perm: 0o666, Nlink: 1, RdevMajor: 1, RdevMinor: 3},
		"p": {Path: "p", Type: btrfstest.TypeDir, Ino: 2, Perm: 0o755, Nlink: 1, Placeholder: true},
	}, Links: [][]string{{"f", "g"}}}
	want := `gobtrfs-manifest 1
"." dir ino=256 perm=0755 uid=0 gid=0 nlink=1 size=12 mtime=-1
"f" file ino=257 perm=4644 uid=1 gid=2 nlink=2 size=5 mtime=1700000000123456789 sha256=0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f data=0+5
	xattr "user.a" "é"
	xattr "user.b" "\x00"
"g" file ino=0 perm=0000 uid=0 gid=0 nlink=2 size=0 mtime=0 sha256=0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f data=
"l" symlink ino=0 perm=0777 uid=0 gid=0 nlink=1 size=3 mtime=0 target="a b"
"n" chr ino=0 perm=0666 uid=0 gid=0 nlink=1 size=0 mtime=0 rdev=1:3
"p" dir ino=2 perm=0755 uid=0 gid=0 nlink=1 size=0 mtime=0 placeholder=1
link "f" "g"
`
	if got := string(format(t, tr)); got != want {
		t.Fatalf("manifest format changed:\n%s\nwant:\n%s", got, want)
	}
}

func TestManifestRejects(t *testing.T) {
	const h = "gobtrfs-manifest 1\n"
	const sha = "sha256=0000000000000000000000000000000000000000000000000000000000000000"
	bad := map[string]string{
		"no header":        `"." dir` + "\n",
		"wrong version":    "gobtrfs-manifest 2\n",
		"empty":            "",
		"unquoted path":    h + ". dir\n",
		"absolute path":    h + `"/x" dir` + "\n",
		"dotdot path":      h + `"a/../b" dir` + "\n",
		"duplicate path":   h + `"a" dir` + "\n" + `"a" dir` + "\n",
		"unknown type":     h + `"a" door` + "\n",
		"unknown field":    h + `"a" dir color=red` + "\n",
		"field for type":   h + `"a" dir target="x"` + "\n",
		"file without sum": h + `"a" file size=1` + "\n",
		"bad sha":          h + `"a" file sha256=xyz` + "\n",
		"bad perm":         h + `"a" dir perm=0999` + "\n",
		"perm too big":     h + `"a" dir perm=17777` + "\n",
		"bad range":        h + `"a" file ` + sha + " data=5+0\n",
		"overlap range":    h + `"a" file ` + sha + " data=0+10,5+10\n",
		"huge range":       h + `"a" file ` + sha + " data=0+9223372036854775807\n",
		"bad rdev":         h + `"a" chr rdev=1` + "\n",
		"quoted number":    h + `"a" dir ino="1"` + "\n",
		"double space":     h + `"a"  dir` + "\n",
		"trailing space":   h + `"a" dir ` + "\n",
		"duplicate field":  h + `"a" dir ino=1 ino=2` + "\n",
		"empty key":        h + `"a" dir =1` + "\n",
		"xattr first":      h + "\txattr \"user.a\" \"b\"\n",
		"xattr dup":        h + `"a" dir` + "\n\txattr \"user.a\" \"b\"\n\txattr \"user.a\" \"c\"\n",
		"xattr empty name": h + `"a" dir` + "\n\txattr \"\" \"b\"\n",
		"link unknown":     h + `"a" fifo` + "\nlink \"a\" \"b\"\n",
		"link to dir":      h + `"a" fifo` + "\n" + `"b" dir` + "\nlink \"a\" \"b\"\n",
		"link single":      h + `"a" fifo` + "\nlink \"a\"\n",
		"link twice":       h + `"a" fifo` + "\n" + `"b" fifo` + "\nlink \"a\" \"b\"\nlink \"a\" \"b\"\n",
		"bad quote":        h + `"a dir` + "\n",
		"garbage":          h + "hello\n",
		"long line":        h + `"` + strings.Repeat("a", 5<<20) + `" dir` + "\n",
	}
	for name, in := range bad {
		if tr, err := btrfstest.Parse(strings.NewReader(in)); err == nil {
			t.Errorf("%s: Parse accepted %.60q: %+v", name, in, tr)
		}
	}
}

// FuzzParse: any input either fails to parse or round-trips: what Parse
// accepted formats to a manifest that parses to the same tree.
func FuzzParse(f *testing.F) {
	f.Add(format(f, sampleTree()))
	f.Add([]byte("gobtrfs-manifest 1\n# c\n\n\"a\" fifo perm=+7\n"))
	f.Add([]byte("gobtrfs-manifest 1\n\"a\" file sha256=" + strings.Repeat("0", 64) + " data=0+1,4096+2\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := btrfstest.Parse(bytes.NewReader(in))
		if err != nil {
			return
		}
		text := format(t, tr)
		again, err := btrfstest.Parse(bytes.NewReader(text))
		if err != nil {
			t.Fatalf("reparse: %v\n%s", err, text)
		}
		if d := cmp.Diff(tr, again); d != "" {
			t.Fatalf("round trip changed the tree:\n%s", d)
		}
	})
}
