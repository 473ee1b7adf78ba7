package cli

import (
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	out, stderr, code := run(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "gobtrfs ") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 || stderr != "" {
		t.Errorf("--version: exit %d, %q, %q", code, out, stderr)
	}
}
