package cli

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// progs runs a btrfs-progs (or other host) command and returns its
// standard output, failing the test on an error.
func progs(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, msg)
	}
	return string(out)
}

// ok runs gobtrfs and fails the test unless it exits 0.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	return mustRun(t, 0, args...)
}

// TestSubvolumeVerbs makes subvolumes and sets the default with gobtrfs,
// and compares subvolume show, get-default and list with btrfs-progs on
// the kernel's mount of the same image.
func TestSubvolumeVerbs(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	if out := ok(t, "subvolume", "create", img+":/sv", img+":/top"); out != "Create subvolume '"+img+":/sv'\nCreate subvolume '"+img+":/top'\n" {
		t.Errorf("subvolume create printed %q", out)
	}
	ok(t, "mkdir", img+":/d")
	ok(t, "subvolume", "create", img+":/d/inner")
	ok(t, "subvolume", "create", img+":/sv/nested")
	if _, _, code := run(t, "subvolume", "create", img+":/sv"); code != 1 {
		t.Errorf("create over an existing subvolume: exit %d, want 1", code)
	}
	ok(t, "subvolume", "set-default", "257", img)
	if out := ok(t, "subvolume", "get-default", img); out != "ID 257 gen 7 top level 5 path top\n" {
		t.Errorf("get-default after set-default 257: %q", out)
	}
	ok(t, "subvolume", "set-default", img+":/d/inner")
	btrfstest.Check(t, []string{img}, false)

	mnt := btrfstest.Mount(t, "ro,subvolid=5", img)
	for _, args := range [][]string{
		{"get-default"}, {"list"}, {"show"}, {"show", "sv"}, {"show", "d/inner"}, {"show", "sv/nested"},
	} {
		var target, ours string
		if args[0] == "show" {
			p := ""
			if len(args) > 1 {
				p = args[1]
			}
			target = mnt + "/" + p
			ours = ok(t, "subvolume", "show", img+":/"+p)
		} else {
			target = mnt
			ours = ok(t, "subvolume", args[0], img)
		}
		want := progs(t, "btrfs", "subvolume", args[0], target)
		if ours != want {
			t.Errorf("subvolume %v differs:\nbtrfs-progs:\n%s\ngobtrfs:\n%s", args, want, ours)
		}
	}
	btrfstest.Unmount(t, mnt)

	if _, stderr, code := run(t, "subvolume", "show", img+":/d"); code != 1 || !strings.Contains(stderr, "not a subvolume") {
		t.Errorf("show of a directory: exit %d, %q", code, stderr)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(ok(t, "subvolume", "list", "--json", img)), &list); err != nil || len(list) != 4 {
		t.Fatalf("subvolume list --json: %v, %d entries", err, len(list))
	}
	for k := range list[0] {
		if k != strings.ToLower(k) {
			t.Errorf("subvolume list --json key %q is not snake_case", k)
		}
	}
	if list[0]["parent_id"] != float64(5) || list[0]["path"] != "sv" {
		t.Errorf("subvolume list --json first entry: %v", list[0])
	}
}
