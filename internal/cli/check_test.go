package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/mkfs"
)

func TestCheckCommandClean(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run(t, "check", "--check-data-csum", img)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"Opening filesystem to check...", "Checking filesystem on " + img, "UUID: ",
		"bytes used, no error found", "total csum bytes: ", "total tree bytes: ", "total fs tree bytes: ",
		"total extent tree bytes: ", "btree space waste bytes: ", "file data blocks allocated: ", " referenced "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"[1/8] checking log skipped (none written)", "[2/8] checking root items",
		"[3/8] checking extents", "[4/8] checking free space tree", "[5/8] checking fs roots",
		"[6/8] checking csums against data", "[7/8] checking root refs", "[8/8] checking quota groups skipped (not enabled on this FS)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

func TestCheckCommandProblems(t *testing.T) {
	// mkfs.btrfs 6.2 left free-space info of removed block groups in
	// this fixture; btrfs check 6.19 reports it in the same words.
	img := btrfstest.OpenFixture(t, "kernel-16k-crc32c")
	out, errs, code := run(t, "check", img)
	if code != 1 || !strings.Contains(out, "error(s) found") ||
		!strings.Contains(errs, "Space key logical 1048576 length 4194304 has no corresponding block group") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	out, _, code = run(t, "check", "--json", img)
	var rep struct {
		UUID     string `json:"uuid"`
		Problems []struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"problems"`
		Summary map[string]uint64 `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	if len(rep.Problems) == 0 || rep.Problems[0].Kind != "free_space" || rep.Summary["bytes_used"] == 0 || rep.Summary["total_tree_bytes"] == 0 {
		t.Fatalf("--json: %+v", rep)
	}
}

func TestCheckCommandCannotRun(t *testing.T) {
	_, errs, code := run(t, "check", filepath.Join(t.TempDir(), "missing.img"))
	if code != 2 || !strings.Contains(errs, "ERROR: ") {
		t.Fatalf("missing image: exit %d, stderr %q", code, errs)
	}
	if _, _, code := run(t, "check"); code != ExitUsage {
		t.Fatalf("no operand: exit %d", code)
	}
}

func TestCheckCommandDevices(t *testing.T) {
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{NumDevices: 2, DataProfile: "raid1", MetadataProfile: "raid1"})
	out, errs, code := run(t, "check", "--check-data-csum", "-d", devs[1], devs[0])
	// mkfs.btrfs before 6.19 leaves free-space info of removed block
	// groups, which is the one problem allowed here.
	if code == 2 || !strings.Contains(out, "bytes used") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, line := range strings.Split(errs, "\n") {
		if line != "" && !strings.HasPrefix(line, "[") && !strings.Contains(line, "has no corresponding block group") {
			t.Errorf("unexpected problem: %s", line)
		}
	}
	// A device of another filesystem is refused: the check cannot run.
	other := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	if _, _, code := run(t, "check", "-d", other, devs[0]); code != 2 {
		t.Errorf("device of another filesystem: exit %d, want 2", code)
	}
}
