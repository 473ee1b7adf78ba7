package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// Exit statuses and the shape of messages: one "gobtrfs CMD: " prefix, a
// usage error ending with where to read more, as coreutils does.

func TestNoCommandAndUnknownHelpExitNonZero(t *testing.T) {
	out, stderr, code := run(t)
	if code != ExitUsage || out != "" || !strings.Contains(stderr, "Available Commands") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	_, stderr, code = run(t, "help", "foo")
	if code != ExitUsage || stderr != "gobtrfs help: unknown command \"foo\"\nTry 'gobtrfs --help' for more information.\n" {
		t.Errorf("help foo: exit %d, stderr %q", code, stderr)
	}
	out, _, code = run(t, "help", "subvolume", "list")
	if code != ExitOK || !strings.Contains(out, "Usage:") {
		t.Errorf("help subvolume list: exit %d\n%s", code, out)
	}
	_, stderr, code = run(t, "nosuch")
	if code != ExitUsage || !strings.HasPrefix(stderr, "gobtrfs: unknown command \"nosuch\"\n") {
		t.Errorf("unknown command: exit %d, stderr %q", code, stderr)
	}
}

func TestUsageErrorsEndWithHint(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mkdir"}, "gobtrfs mkdir: missing operand\nTry 'gobtrfs mkdir --help' for more information.\n"},
		{[]string{"cp", "a"}, "gobtrfs cp: missing destination file operand after 'a'\nTry 'gobtrfs cp --help' for more information.\n"},
		{[]string{"mv", "-z"}, "gobtrfs mv: unknown option -z\nTry 'gobtrfs mv --help' for more information.\n"},
		{[]string{"ls"}, "gobtrfs ls: missing operand\nTry 'gobtrfs ls --help' for more information.\n"},
		{[]string{"subvolume", "list"}, "gobtrfs subvolume list: missing operand (takes 1)\nTry 'gobtrfs subvolume list --help' for more information.\n"},
		{[]string{"extract", "a", "b", "c"}, "gobtrfs extract: extra operand (takes 2)\nTry 'gobtrfs extract --help' for more information.\n"},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != ExitUsage || stderr != tc.want {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestOnePrefixAndMissingImage checks that a failure names the command
// once and the path once, in strerror's words, and that a misspelled
// image name says the file is missing.
func TestOnePrefixAndMissingImage(t *testing.T) {
	img := editImage(t)
	mustRun(t, ExitOK, "mkdir", img+":/d")
	mustRun(t, ExitOK, "touch", img+":/f")
	missing := filepath.Join(t.TempDir(), "nosuch.img")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", missing}, "gobtrfs ls: " + missing + ": No such file or directory\n"},
		{[]string{"ls", missing + ":/etc"}, "gobtrfs ls: " + missing + ": No such file or directory\n"},
		{[]string{"cat", missing + ":/etc/motd"}, "gobtrfs cat: " + missing + ": No such file or directory\n"},
		{[]string{"extract", missing + ":/etc", t.TempDir()}, "gobtrfs extract: " + missing + ": No such file or directory\n"},
		{[]string{"cp", missing + ":/etc", t.TempDir()}, "gobtrfs cp: " + missing + ": No such file or directory\n"},
		{[]string{"mkdir", missing + ":/d"}, "gobtrfs mkdir: " + missing + ": No such file or directory\n"},
		{[]string{"ls", img + ":/nosuch"}, "gobtrfs ls: " + img + ":/nosuch: No such file or directory\n"},
		{[]string{"rmdir", img + ":/nosuch"}, "gobtrfs rmdir: " + img + ":/nosuch: No such file or directory\n"},
		{[]string{"mkdir", img + ":/"}, "gobtrfs mkdir: " + img + ":/: File exists\n"},
		{[]string{"ln", "-s", "x", img + ":/f"}, "gobtrfs ln: " + img + ":/f: File exists\n"},
		{[]string{"mv", img + ":/d", img + ":/d/e"}, "gobtrfs mv: " + img + ":/d -> " + img + ":/d/e: Invalid argument\n"},
		{[]string{"touch", "-r", img + ":/nosuch", img + ":/x"}, "gobtrfs touch: failed to get attributes of '" + img + ":/nosuch': No such file or directory\n"},
		{[]string{"ls", filepath.Dir(missing)}, "gobtrfs ls: " + filepath.Dir(missing) + ": Is a directory\n"},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != ExitFailure || stderr != tc.want {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
	_, stderr, code := runEdit(t, img, "rmdir /nosuch\n")
	if want := "gobtrfs edit: line 1: rmdir: /nosuch: No such file or directory\n"; code != ExitFailure || stderr != want {
		t.Errorf("edit: exit %d, stderr %q, want %q", code, stderr, want)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("a command made the missing image")
	}
}

// TestDashH checks that -h means help only where the command's model
// has no other -h: ls -h is --human-readable, chown -h and touch -h
// --no-dereference, mkdir -h an unknown option as in coreutils.
func TestDashH(t *testing.T) {
	img := btrfstest.OpenFixture(t, "rootdir-16k-crc32c")
	if out, _, code := run(t, "ls", "-lh", img); code != ExitOK || strings.Contains(out, "Usage:") || !strings.Contains(out, "regular") {
		t.Errorf("ls -lh: exit %d\n%s", code, out)
	}
	for _, cmd := range []string{"fallocate", "cat", "extract"} {
		if out, _, code := run(t, cmd, "-h"); code != ExitOK || !strings.Contains(out, "Usage:") {
			t.Errorf("%s -h: exit %d, want its help", cmd, code)
		}
	}
	if _, stderr, code := run(t, "mkdir", "-h"); code != ExitUsage || !strings.Contains(stderr, "unknown option -h") {
		t.Errorf("mkdir -h: exit %d, %q", code, stderr)
	}
}
