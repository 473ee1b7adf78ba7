package cli

import (
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestLsLogReplay: commands show what the kernel shows of a filesystem
// left with a log tree (fsync'd files), without a warning, and leave it
// unreplayed on disk.
func TestLsLogReplay(t *testing.T) {
	img := btrfstest.OpenFixture(t, "log-new-files")
	out, errOut, code := run(t, "ls", img+":d")
	if code != ExitOK || errOut != "" {
		t.Fatalf("ls: exit %d, stderr %q", code, errOut)
	}
	for _, name := range []string{"new", "small"} {
		if !strings.Contains(out, name) {
			t.Errorf("ls d: %q lacks %s (fsync'd, only in the log)", out, name)
		}
	}
	out, _, code = run(t, "cat", img+":d/small")
	if code != ExitOK || out != "inline bytes" {
		t.Errorf("cat d/small: exit %d, %q", code, out)
	}
}
