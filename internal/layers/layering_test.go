package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/gobtrfs/btrfs"

var rank = map[string]int{
	"internal/disk": 0, "internal/compress": 0, "internal/invariants": 0, "internal/modespec": 0,
	"internal/blockdev": 1, "internal/probe": 1,
	"internal/chunk": 2,
	"internal/ctree": 3,
	"internal/alloc": 4, "internal/bench": 4, "internal/fsview": 4,
	"internal/txn": 5,
	"":             6,
	"mkfs":         7, "check": 7, "fuse": 7, "internal/dump": 7, "internal/extract": 7,
	// internal/fileio drives the filesystem's public API like a program
	// would (sysbench fileio), so it sits with the other tools; the
	// command makes its images with mkfs.
	"internal/fileio": 7,
	"internal/cli":    8,
	"cmd/gobtrfs":     9,
}

// forbidden lists imports that ranks alone would allow but the design does not.
var forbidden = map[string][]string{
	"check": {"internal/txn", "internal/alloc"},
	// fuse is built on the filesystem's public API only, which it proves
	// sufficient for a POSIX filesystem (docs/design/0011).
	"fuse": {"internal/disk", "internal/compress", "internal/blockdev", "internal/probe", "internal/chunk",
		"internal/ctree", "internal/alloc", "internal/bench", "internal/txn", "internal/fsview"},
}

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := rel(fields[0])
		if pkg == "internal/layers" || pkg == "internal/btrfstest" {
			continue
		}
		r, ok := rank[pkg]
		if !ok {
			t.Errorf("package %s has no rank: add it to internal/layers", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := rel(imp)
			if dep == "internal/btrfstest" {
				t.Errorf("%s imports the test harness %s outside tests", pkg, dep)
				continue
			}
			dr, ok := rank[dep]
			if !ok {
				t.Errorf("package %s has no rank: add it to internal/layers", dep)
				continue
			}
			if dr >= r {
				t.Errorf("%s (rank %d) imports %s (rank %d): imports must point down", pkg, r, dep, dr)
			}
			for _, f := range forbidden[pkg] {
				if dep == f {
					t.Errorf("%s must never import %s", pkg, dep)
				}
			}
		}
	}
}

func rel(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}
