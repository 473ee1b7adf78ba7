package cli

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

func TestTruncateParseSize(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		cur     int64
		want    int64
		wantErr bool
	}{
		{"0", 99, 0, false},
		{"100", 5, 100, false},
		{"4K", 0, 4096, false},
		{"4k", 0, 4096, false},
		{"1KB", 0, 1000, false},
		{"1MiB", 0, 1 << 20, false},
		{"2G", 0, 2 << 30, false},
		{"0x10", 0, 16, false},
		{"+1K", 10, 1034, false},
		{"-1K", 10, 0, false},
		{"-5", 10, 5, false},
		{"<5", 10, 5, false},
		{"<50", 10, 10, false},
		{">50", 10, 50, false},
		{"/4K", 5000, 4096, false},
		{"%4K", 5000, 8192, false},
		{"%4K", 8192, 8192, false},
		{"", 0, 0, true},
		{"K", 0, 0, true},
		{"1Q", 0, 0, true},
		{"-", 0, 0, true},
		{"/0", 0, 0, true},
		{"9E", 0, 0, true},
		{"+1", 1<<63 - 1, 0, true},
	} {
		sp, err := parseSizeSpec(tc.spec)
		var got int64
		if err == nil {
			got, err = sp.apply(tc.cur)
		}
		if (err != nil) != tc.wantErr || err == nil && got != tc.want {
			t.Errorf("%q on %d: %d, %v; want %d, error %v", tc.spec, tc.cur, got, err, tc.want, tc.wantErr)
		}
	}
}

func FuzzTruncateParseSize(f *testing.F) {
	for _, s := range []string{"4K", "+1MiB", "%4k", "/0", "0x10", "9E", "-1"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, s string, cur int64) {
		sp, err := parseSizeSpec(s)
		if err != nil || cur < 0 {
			return
		}
		if n, err := sp.apply(cur); err == nil && n < 0 {
			t.Errorf("%q on %d: negative size %d", s, cur, n)
		}
	})
}

func TestEditDataUnescape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`plain`, "plain"},
		{`a\nb\tc\r\\`, "a\nb\tc\r\\"},
		{`\0101\0`, "A\x00"},
		{`\x41\xff`, "A\xff"},
		{`\0777`, ""},
		{`\x4`, ""},
		{`\q`, ""},
		{`end\`, ""},
	} {
		got, err := unescapeText(tc.in)
		if tc.want == "" && err == nil || tc.want != "" && (err != nil || string(got) != tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func FuzzEditDataUnescape(f *testing.F) {
	for _, s := range []string{`a\nb`, `\0101`, `\x41`, `\`, `\x`, `\0`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := unescapeText(s)
		if err == nil && len(out) > len(s) {
			t.Errorf("%q: %d bytes out of %d", s, len(out), len(s))
		}
	})
}

// dataStep is one change made both by our command line and by the kernel
// on a mounted filesystem, to compare the results.
type dataStep struct {
	args   []string // gobtrfs word and arguments; "@" before a path means IMAGE:
	kernel func(t *testing.T, dir string)
}

func kernelFile(t *testing.T, dir, name string, flag int, f func(*os.File) error) {
	t.Helper()
	fd, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|flag, 0o644)
	if err == nil {
		err = f(fd)
		fd.Close()
	}
	if err != nil {
		t.Fatalf("kernel %s: %v", name, err)
	}
}

func fallocStep(name string, mode uint32, off, length int64, args ...string) dataStep {
	return dataStep{args: args, kernel: func(t *testing.T, dir string) {
		kernelFile(t, dir, name, os.O_CREATE, func(f *os.File) error {
			return unix.Fallocate(int(f.Fd()), mode, off, length)
		})
	}}
}

func truncStep(name string, create bool, size func(int64) int64, args ...string) dataStep {
	return dataStep{args: args, kernel: func(t *testing.T, dir string) {
		flag := 0
		if create {
			flag = os.O_CREATE
		}
		kernelFile(t, dir, name, flag, func(f *os.File) error {
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			return f.Truncate(size(fi.Size()))
		})
	}}
}

func writeStep(name string, data []byte, off int64, trunc bool, args ...string) dataStep {
	return dataStep{args: args, kernel: func(t *testing.T, dir string) {
		flag := os.O_CREATE
		if trunc {
			flag |= os.O_TRUNC
		}
		kernelFile(t, dir, name, flag, func(f *os.File) error {
			if off < 0 {
				fi, err := f.Stat()
				if err != nil {
					return err
				}
				off = fi.Size()
			}
			_, err := f.WriteAt(data, off)
			return err
		})
	}}
}

func TestTruncateFallocateWriteMatchKernel(t *testing.T) {
	img := editImage(t)
	ref := editImage(t)
	refMnt := btrfstest.Mount(t, "", ref)
	r := rand.New(rand.NewSource(42))
	host := filepath.Join(t.TempDir(), "data")
	data := make([]byte, 300<<10)
	r.Read(data)
	if err := os.WriteFile(host, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const keep, punch = unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	steps := []dataStep{
		truncStep("t1", true, func(int64) int64 { return 100 << 10 }, "truncate", "-s", "100K", "@t1"),
		writeStep("t2", data, 0, true, "write", "-f", host, "@t2"),
		truncStep("t2", false, func(n int64) int64 { return n - 5000 }, "truncate", "-s", "-5000", "@t2"),
		truncStep("t2", false, func(n int64) int64 { return (n + 4095) / 4096 * 4096 }, "truncate", "-s", "%4K", "@t2"),
		truncStep("t2", false, func(n int64) int64 { return n + 1<<20 }, "truncate", "--size=+1M", "@t2"),
		{args: []string{"truncate", "-c", "-s", "5", "@nosuch"}, kernel: func(*testing.T, string) {}},
		fallocStep("f1", 0, 0, 64<<10, "fallocate", "-l", "64K", "@f1"),
		fallocStep("f1", keep, 1<<20, 128<<10, "fallocate", "-n", "-o", "1M", "-l", "128KiB", "@f1"),
		fallocStep("t1", 0, 200<<10, 16<<10, "fallocate", "-o", "200K", "-l", "16K", "@t1"),
		writeStep("p1", data, 0, true, "write", "-f", host, "@p1"),
		fallocStep("p1", punch, 6<<10, 100<<10, "fallocate", "-p", "-o", "6K", "-l", "100K", "@p1"),
		fallocStep("p1", punch, 290<<10, 1<<20, "fallocate", "--punch-hole", "--offset=290K", "--length=1M", "@p1"),
		writeStep("t3", []byte("xyz"), 0, true, "write", "@t3", "xyz"),
		writeStep("t3", []byte("a\nb"), -1, false, "write", "-a", "-e", "@t3", `a\nb`),
		writeStep("t3", []byte("Q"), 10, false, "write", "-o", "10", "@t3", "Q"),
		writeStep("t4", []byte("long old contents"), 0, true, "write", "@t4", "long old contents"),
		writeStep("t4", []byte("new"), 0, true, "write", "@t4", "new"),
		writeStep("t1", data[:5000], 50000, false, "write", "-o", "50000", "-f", host+"-5000", "@t1"),
	}
	if err := os.WriteFile(host+"-5000", data[:5000], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		args := append([]string(nil), st.args...)
		for i, a := range args {
			if strings.HasPrefix(a, "@") {
				args[i] = img + ":" + a[1:]
			}
		}
		mustRun(t, ExitOK, args...)
		st.kernel(t, refMnt)
	}
	// Failures change nothing.
	mustRun(t, ExitUsage, "truncate", img+":t1")
	mustRun(t, ExitUsage, "truncate", "-s", "1Q", img+":t1")
	mustRun(t, ExitUsage, "fallocate", "-l", "0", img+":t1")
	mustRun(t, ExitUsage, "fallocate", img+":t1")
	mustRun(t, ExitUsage, "write", img+":t1")
	mustRun(t, ExitUsage, "write", "-a", "-o", "1", img+":t1", "x")
	mustRun(t, ExitFailure, "fallocate", "-p", "-l", "4K", img+":nosuch")
	mustRun(t, ExitFailure, "truncate", "-s", "0", img+":t1", img+":nodir/x")
	mustRun(t, ExitFailure, "write", "-f", "/nonexistent", img+":t2")
	mustRun(t, ExitOK, "mkdir", img+":dir")
	mustRun(t, ExitFailure, "truncate", "-s", "0", img+":dir")
	btrfstest.Unmount(t, refMnt)

	btrfstest.Check(t, []string{img}, true)
	want := scanDir(t, btrfstest.Mount(t, "ro", ref))
	got := scanDir(t, btrfstest.Mount(t, "ro", img))
	for _, p := range []string{"t1", "t2", "t3", "t4", "f1", "p1", "nosuch"} {
		w, g := want.Entries[p], got.Entries[p]
		if w == nil || g == nil {
			if w != g {
				t.Errorf("%s: ours %+v, kernel's %+v", p, g, w)
			}
			continue
		}
		if g.Size != w.Size || g.SHA256 != w.SHA256 || !sameRanges(g.Data, w.Data) || g.Perm != w.Perm {
			t.Errorf("%s: ours size %d data %v perm %o, kernel's size %d data %v perm %o (contents equal: %v)",
				p, g.Size, g.Data, g.Perm, w.Size, w.Data, w.Perm, g.SHA256 == w.SHA256)
		}
	}
}

func TestEditDataScript(t *testing.T) {
	img := editImage(t)
	hostDir := t.TempDir()
	src := filepath.Join(hostDir, "tree")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "f"), []byte("from the host\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	script := `# host paths for cp sources, image paths for the rest
cp -a ` + src + ` /copied
mkdir d
write d/t 'hello world'
write -a -e d/t '\nmore\n'
cp ` + filepath.Join(src, "sub", "f") + ` d
truncate -s 3 d/f
commit
write d/t changed
truncate -s 0 copied/sub/f
cp ` + filepath.Join(hostDir, "nosuch") + ` d/x
write never x
`
	_, stderr, code := runEdit(t, img, script)
	if code != ExitFailure || !strings.Contains(stderr, "edit: line 11: ") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"d/t": "hello world\nmore\n", "d/f": "fro", "copied/sub/f": "from the host\n"} {
		if b, err := fsys.ReadFile(p); err != nil || !bytes.Equal(b, []byte(want)) {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := fsys.Lstat("never"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("never: %v, want it absent", err)
	}
	fsys.Close()
	want := scanDir(t, src)
	_, tree := scanMounted(t, img)
	reportDiff(t, "cp -a in a script", btrfstest.Diff(want, tree.Sub("copied"), btrfstest.DiffOptions{}))
	if e := tree.Entries["d/f"]; e == nil || e.Perm != 0o640&^processUmask() || e.Size != 3 {
		t.Errorf("d/f: %+v", e)
	}
}
