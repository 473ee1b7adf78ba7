package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

func TestEditSplitLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   # only a comment", nil},
		{"mkdir -p a/b", []string{"mkdir", "-p", "a/b"}},
		{"  touch\t'a b'  \"c d\"  ", []string{"touch", "a b", "c d"}},
		{`ln -s 'it''s' x`, []string{"ln", "-s", "its", "x"}},
		{`setfattr -n user.a -v "\"q\" \\ \$ \x" f`, []string{"setfattr", "-n", "user.a", "-v", `"q" \ $ \x`, "f"}},
		{`a\ b c\#d e#f # gone`, []string{"a b", "c#d", "e#f"}},
		{`'' "" x`, []string{"", "", "x"}},
		{`'$HOME' "#x"`, []string{"$HOME", "#x"}},
		{"a'b'\"c\"d", []string{"abcd"}},
		{"crlf\r", []string{"crlf"}},
	} {
		got, err := splitLine(tc.in)
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("splitLine(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`'open`, `"open`, `a\`, `x "a\"`} {
		if got, err := splitLine(in); err == nil {
			t.Errorf("splitLine(%q) = %q, want an error", in, got)
		}
	}
}

func TestEditParseWordArgs(t *testing.T) {
	defs := append(append([]flagDef(nil), rmWord.flags...), mkdirWord.flags[1])
	for _, tc := range []struct {
		args []string
		vals map[string][]string
		ops  []string
	}{
		{[]string{"-rf", "a", "-m", "7", "b"}, map[string][]string{"r": {""}, "f": {""}, "mode": {"7"}}, []string{"a", "b"}},
		{[]string{"-m755", "--", "-r"}, map[string][]string{"mode": {"755"}}, []string{"-r"}},
		{[]string{"--mode=1", "--mode", "2", "-R", "-"}, map[string][]string{"mode": {"1", "2"}, "r": {""}}, []string{"-"}},
	} {
		a, err := parseWordArgs(defs, tc.args)
		if err != nil || !cmp.Equal(a.vals, tc.vals) || !cmp.Equal(a.ops, tc.ops) {
			t.Errorf("parseWordArgs(%q) = %v %q, %v", tc.args, a.vals, a.ops, err)
		}
	}
	for _, args := range [][]string{{"-z"}, {"--nope"}, {"-m"}, {"--mode"}, {"--force=1"}} {
		_, err := parseWordArgs(defs, args)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("parseWordArgs(%q): err %v, want a usage error", args, err)
		}
	}
	// A word without options takes "-w" as an operand (chmod -w f).
	a, err := parseWordArgs(nil, []string{"-w", "f"})
	if err != nil || !cmp.Equal(a.ops, []string{"-w", "f"}) {
		t.Errorf("no options: %q, %v", a.ops, err)
	}
}

func TestEditParseMode(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		old   uint32
		dir   bool
		want  uint32
		isErr bool
	}{
		{"755", 0o7777, false, 0o755, false},
		{"4755", 0, false, 0o4755, false},
		{"0", 0o777, false, 0, false},
		{"u+x", 0o644, false, 0o744, false},
		{"go-w", 0o666, false, 0o644, false},
		{"a=r", 0o777, false, 0o444, false},
		{"u+s", 0o755, false, 0o4755, false},
		{"g+s,+t", 0o755, false, 0o3755, false},
		{"+w", 0o444, false, 0o666, false},
		{"=", 0o777, false, 0, false},
		{"a+X", 0o644, true, 0o755, false},
		{"a+X", 0o644, false, 0o644, false},
		{"a+X", 0o744, false, 0o755, false},
		{"g=u", 0o750, false, 0o770, false},
		{"o=g-x", 0o751, false, 0o754, false},
		{"u=rw,go=r", 0o4777, false, 0o644, false},
		{"u+t", 0o644, false, 0o644, false},
		{"o+t", 0o644, false, 0o1644, false},
		{"", 0, false, 0, true},
		{"u", 0, false, 0, true},
		{"u+q", 0, false, 0, true},
		{"77777", 0, false, 0, true},
		{"8", 0, false, 0, true},
	} {
		m, err := parseMode(tc.mode)
		if tc.isErr {
			if err == nil {
				t.Errorf("parseMode(%q): no error", tc.mode)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseMode(%q): %v", tc.mode, err)
			continue
		}
		if got := btrfs.UnixMode(m.apply(tc.old, tc.dir)) & 0o7777; got != tc.want {
			t.Errorf("%q on %o (dir %v) = %o, want %o", tc.mode, tc.old, tc.dir, got, tc.want)
		}
	}
}

func TestEditParseDate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2024-05-06", time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC)},
		{"2024-05-06 07:08", time.Date(2024, 5, 6, 7, 8, 0, 0, time.UTC)},
		{"2024-05-06 07:08:09", time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"2024-05-06 07:08:09.25", time.Date(2024, 5, 6, 7, 8, 9, 250e6, time.UTC)},
		{"2024-05-06 07:08:09+02:00", time.Date(2024, 5, 6, 5, 8, 9, 0, time.UTC)},
		{"2024-05-06 07:08Z", time.Date(2024, 5, 6, 7, 8, 0, 0, time.UTC)},
		{"2024-05-06T07:08:09.123456789-01:30", time.Date(2024, 5, 6, 8, 38, 9, 123456789, time.UTC)},
		{"@0", time.Unix(0, 0)},
		{"@1700000000.5", time.Unix(1700000000, 5e8)},
		{"@-1.5", time.Unix(-2, 5e8)},
	} {
		got, err := parseDate(tc.in)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("parseDate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "yesterday", "2024-13-01", "@", "@1.", "@1.1234567890", "@x", "2024-05-06 07:08:09 +0200"} {
		if got, err := parseDate(in); err == nil {
			t.Errorf("parseDate(%q) = %v, want an error", in, got)
		}
	}
}

func TestEditXattrValues(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"0x00ff01", "\x00\xff\x01"},
		{"0XAB", "\xab"},
		{"0saGkK", "hi\n"},
		{`"a\"b\\c\012d"`, "a\"b\\c\nd"},
		{`"x\0y"`, "x\x00y"},
		{"", ""},
		{"0", "0"},
		{"0y", "0y"},
	} {
		got, err := decodeXattrValue(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("decodeXattrValue(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"0xabc", "0xzz", "0s!!"} {
		if _, err := decodeXattrValue(in); err == nil {
			t.Errorf("decodeXattrValue(%q): no error", in)
		}
	}
	// What attr's getfattr printed for these values (default encoding,
	// then -e text), recorded on a kernel tmpfs.
	for _, tc := range []struct{ v, def, text string }{
		{"", `""`, `""`},
		{"\x00", `""`, `""`},
		{"\x00\x00", "0sAAA=", `"\000"`},
		{"\r\n", "0sDQo=", `"\015\012"`},
		{" ", `" "`, `" "`},
		{"abc\t\n", "0sYWJjCQo=", "\"abc\t\\012\""},
		{"abcd\x00\x00", "0sYWJjZAAA", `"abcd\000"`},
		{"abcdef\n", "0sYWJjZGVmCg==", `"abcdef\012"`},
		{"abcdefg", `"abcdefg"`, `"abcdefg"`},
		{"abcdefg\x00", `"abcdefg"`, `"abcdefg"`},
		{"abcdefg\n", `"abcdefg\012"`, `"abcdefg\012"`},
		{"abcdefgh\x00\x00", `"abcdefgh\000"`, `"abcdefgh\000"`},
		{"abcdefg\xe9", "\"abcdefg\xe9\"", "\"abcdefg\xe9\""},
		{"~\x7f", "0sfn8=", "\"~\x7f\""},
		{"a\"b\\c\nd", "0sYSJiXGMKZA==", `"a\"b\\c\012d"`},
	} {
		if got := encodeXattr(tc.v, "", true); got != tc.def {
			t.Errorf("encodeXattr(%q) = %s, want %s", tc.v, got, tc.def)
		}
		if got := encodeXattr(tc.v, "text", true); got != tc.text {
			t.Errorf("encodeXattr(%q, text) = %s, want %s", tc.v, got, tc.text)
		}
	}
	if got := encodeXattr("abc\x00", "hex", true); got != "0x61626300" {
		t.Errorf("hex: %s", got)
	}
	if got := octalQuote("user.a\nb\\=", "=\n\r"); got != `user.a\012b\134\075` {
		t.Errorf("octalQuote: %s", got)
	}
}

// editImage makes a fresh filesystem image for the edit tests.
func editImage(t *testing.T) string {
	t.Helper()
	btrfstest.RequireProgs(t)
	return btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
}

func runEdit(t *testing.T, img, script string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e strings.Builder
	code = Main([]string{"edit", img}, strings.NewReader(script), &o, &e)
	return o.String(), e.String(), code
}

func TestEditScriptCommitsAndStopsAtFailure(t *testing.T) {
	img := editImage(t)
	script := `# first transaction
mkdir a
touch -d "2020-01-02 03:04:05" 'a/f 1'
setfattr -n user.k -v "va lue" 'a/f 1'
commit

mkdir kept-not  # dropped with the failing line below
chmod 700 a
mkdir nosuch/x
mkdir never
`
	_, stderr, code := runEdit(t, img, script)
	if code != ExitFailure || !strings.Contains(stderr, "edit: line 9: ") || !strings.Contains(stderr, "nosuch/x") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	fi, err := fsys.Lstat("a")
	if err != nil || fi.Mode() != fs.ModeDir|0o755 {
		t.Errorf("a: %v, %v (the chmod after the commit must be dropped)", fi, err)
	}
	fi, err = fsys.Lstat("a/f 1")
	if err != nil || !fi.ModTime().Equal(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)) || fi.Mode() != 0o644 {
		t.Errorf("a/f 1: %v, %v", fi, err)
	}
	if v, err := fsys.Getxattr("a/f 1", "user.k"); err != nil || string(v) != "va lue" {
		t.Errorf("user.k = %q, %v", v, err)
	}
	for _, p := range []string{"kept-not", "never"} {
		if _, err := fsys.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it absent", p, err)
		}
	}
	fsys.Close()
	// The kernel sees exactly what the first transaction made.
	_, tree := scanMounted(t, img)
	if got := strings.Join(tree.Paths(), ","); got != ".,a,a/f 1" {
		t.Errorf("kernel sees %s", got)
	}
	checkTree(t, tree, []entryCheck{
		{path: "a", typ: btrfstest.TypeDir, perm: 0o755, uid: 0},
		{path: "a/f 1", typ: btrfstest.TypeRegular, perm: 0o644, uid: 0,
			mtime: time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC), xattrs: map[string]string{"user.k": "va lue"}},
	})
}

func TestEditScriptErrors(t *testing.T) {
	img := editImage(t)
	for _, tc := range []struct{ script, want string }{
		{"mkdir a\nnosuchword x\n", "edit: line 2: unknown word"},
		{"\n\nmkdir 'a\n", "edit: line 3: column 7: unterminated single quote"},
		{"mkdir -z a\n", "edit: line 1: mkdir: unknown option -z"},
		{"commit now\n", "edit: line 1: commit takes no arguments"},
		{"chmod 999 .\n", "edit: line 1: chmod: invalid mode"},
		{"touch -d never x\n", "edit: line 1: touch: invalid date"},
		{"rmdir\n", "edit: line 1: rmdir: missing operand"},
	} {
		_, stderr, code := runEdit(t, img, tc.script)
		if code != ExitFailure || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.script, code, stderr, tc.want)
		}
	}
	// Nothing of the failed scripts was kept.
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if ents, err := fsys.ReadDir("."); err != nil || len(ents) != 0 {
		t.Errorf("top directory: %v, %v; want it empty", ents, err)
	}
	if _, _, code := run(t, "edit"); code != ExitUsage {
		t.Errorf("edit without IMAGE: exit %d", code)
	}
	if _, _, code := run(t, "edit", img, "-f", "/nonexistent/script"); code != ExitFailure {
		t.Errorf("edit with a missing script: exit %d", code)
	}
	out, _, code := run(t, "edit", "--help")
	for _, w := range editWords {
		if code != ExitOK || !strings.Contains(out, "\n  "+w.name+" ") {
			t.Errorf("edit --help (exit %d) does not list %s:\n%s", code, w.name, out)
		}
	}
}

// TestEditScriptSeesItsOwnChanges runs lines that depend on changes made
// earlier in the same transaction.
func TestEditScriptSeesItsOwnChanges(t *testing.T) {
	img := editImage(t)
	script := `mkdir -p a/b
mkdir -p a/b/c
mkdir -p a/b
touch a/b/c/f
setfattr -n user.x -v 'it is' /a/b/c/f
getfattr -d a/b/c/f
mv a/b/c/f a/g
rm -r a/b/c
`
	out, stderr, code := runEdit(t, img, script)
	if code != ExitOK || out != "# file: a/b/c/f\nuser.x=\"it is\"\n\n" {
		t.Fatalf("exit %d, stdout %q: %s", code, out, stderr)
	}
	_, stderr, code = runEdit(t, img, "mkdir n\nrm n\n")
	if code != ExitFailure || !strings.Contains(stderr, "edit: line 2: rm: /n: Is a directory") {
		t.Errorf("rm of a directory made in the same transaction: exit %d, %q", code, stderr)
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if fi, err := fsys.Lstat("a/g"); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("a/g: %v, %v", fi, err)
	}
	for _, p := range []string{"a/b/c", "n"} {
		if _, err := fsys.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it absent", p, err)
		}
	}
}

// TestEditLargeScript runs a script of many lines in one transaction;
// GOBTRFS_LONG=1 makes it 100,000 lines.
func TestEditLargeScript(t *testing.T) {
	img := editImage(t)
	n := 5000
	if os.Getenv("GOBTRFS_LONG") == "1" {
		n = 100000
	}
	var b strings.Builder
	b.WriteString("mkdir d\ncommit\n")
	for i := range n {
		fmt.Fprintf(&b, "touch -d @%d d/f%d\n", i, i)
	}
	start := time.Now()
	if _, stderr, code := runEdit(t, img, b.String()); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Logf("%d lines in %v", n, time.Since(start))
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	ents, err := fsys.ReadDir("d")
	if err != nil || len(ents) != n {
		t.Fatalf("d has %d entries, %v; want %d", len(ents), err, n)
	}
	fi, err := fsys.Lstat(fmt.Sprintf("d/f%d", n-1))
	if err != nil || fi.ModTime().Unix() != int64(n-1) {
		t.Errorf("last file: %v, %v", fi, err)
	}
	btrfstest.Check(t, []string{img}, false)
}

// FuzzEditSplitLine checks that splitLine never panics and that words it
// returns, single-quoted again, split back to the same words.
func FuzzEditSplitLine(f *testing.F) {
	for _, s := range []string{"", "a b", `'x' "y\"z" \#w # c`, `"unterminated`, `a\`, "\t'' \"\"", "x#y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := splitLine(line)
		if err != nil {
			return
		}
		for _, w := range editWords {
			parseWordArgs(w.flags, words)
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		again, err := splitLine(strings.Join(quoted, " "))
		if err != nil || !cmp.Equal(again, words, cmpEmptyNil) {
			t.Fatalf("%q: words %q, requoted %q, %v", line, words, again, err)
		}
	})
}

var cmpEmptyNil = cmp.Comparer(func(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || strings.Join(a, "\x00") == strings.Join(b, "\x00"))
})

// FuzzEditValues checks the mode, date and xattr value decoders on
// arbitrary input, and that every getfattr encoding decodes back with
// setfattr's rules.
func FuzzEditValues(f *testing.F) {
	for _, s := range []string{"u+x,go-w", "4755", "@1.5", "2024-01-02 03:04", "0x00ff", "0saGkK", `"a\012"`, "a\x00\n\r\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := parseMode(s); err == nil {
			if p := m.Apply(0o7777, true); p > 0o7777 {
				t.Fatalf("mode %q gave %o", s, p)
			}
		}
		parseDate(s)
		decodeXattrValue(s)
		for _, enc := range []string{"hex", "base64", "text"} {
			got, err := decodeXattrValue(encodeXattr(s, enc, true))
			want := s
			if enc == "text" {
				want = strings.TrimSuffix(s, "\x00")
			}
			if err != nil || string(got) != want {
				t.Fatalf("%s round trip of %q: %q, %v", enc, s, got, err)
			}
		}
	})
}

func TestEditScriptFile(t *testing.T) {
	img := editImage(t)
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte("mkdir d\ncommit\ngetfattr -d d\nsetfattr -n user.a -v 1 d\ngetfattr -d /d"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, "edit", img, "-f", script)
	if code != ExitOK || out != "# file: d\nuser.a=\"1\"\n\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	out = mustRun(t, ExitOK, "getfattr", "-n", "user.a", img+":d")
	if out != "# file: d\nuser.a=\"1\"\n\n" {
		t.Errorf("after the script: %q", out)
	}
}
