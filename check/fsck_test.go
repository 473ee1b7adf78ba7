package check_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/check"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// knownMismatch lists the fsck test images on which our verdict still
// differs from btrfs-progs 6.19's, with why. The test fails when one of
// them starts to match, so the list only shrinks.
var knownMismatch = map[string]string{
	// Empty: every image matches. Add an image here, with why, only
	// with a plan to remove it.
}

// TestCheckFsckImages runs the checker over btrfs-progs' own fsck test
// images and asserts its verdict (clean or not) equals btrfs check 6.19's.
func TestCheckFsckImages(t *testing.T) {
	imgs := btrfstest.FsckImages(t)
	if len(imgs) == 0 {
		t.Fatal("no fsck images")
	}
	var matched, mismatched int
	for _, img := range imgs {
		t.Run(img.Name, func(t *testing.T) {
			path := btrfstest.RestoreFsckImage(t, img.Name)
			rep, err := check.Run(context.Background(), []string{path}, check.Options{})
			ours := err == nil && rep.Clean()
			var lines []string
			if err != nil {
				lines = append(lines, "error: "+err.Error())
			}
			for i, p := range rep.Problems {
				if i == 5 {
					lines = append(lines, "...")
					break
				}
				lines = append(lines, string(p.Kind)+": "+p.Message)
			}
			why, known := knownMismatch[img.Name]
			if ours == img.Clean() {
				matched++
				if known {
					t.Errorf("verdict now matches btrfs check 6.19 (clean=%v): remove it from knownMismatch", ours)
				}
				return
			}
			mismatched++
			if known {
				t.Logf("known mismatch (%s): ours clean=%v, 6.19 clean=%v", why, ours, img.Clean())
				return
			}
			t.Errorf("ours clean=%v, btrfs check 6.19 clean=%v\n%s", ours, img.Clean(), strings.Join(lines, "\n"))
		})
	}
	t.Logf("%d of %d fsck images match btrfs check 6.19's verdict; %d known mismatches", matched, len(imgs), len(knownMismatch))
}

// progsCategory maps the "errors found in ..." lines of btrfs check to
// the categories problemCategory gives our problems.
var progsCategory = map[string]string{
	"extent allocation tree or chunk allocation": "extent",
	"fs roots":        "fs",
	"csum tree":       "csum",
	"root refs":       "root refs",
	"log":             "log",
	"free space tree": "free space",
}

// problemCategory says which of btrfs check's phases reports p.
func problemCategory(p check.Problem) string {
	switch p.Kind {
	case check.KindQuota:
		return "quota"
	case check.KindRootRef:
		return "root refs"
	case check.KindFreeSpace:
		return "free space"
	case check.KindInode, check.KindDirItem:
		return "fs"
	case check.KindCsum, check.KindDataCsum:
		if p.Tree == treeLog {
			return "log"
		}
		return "csum"
	case check.KindItem, check.KindTreeBlock:
		if p.Tree == treeLog {
			return "log"
		}
		if isFSTree(p.Tree) || (p.Key != nil && fsKeyType(p.Key.Type)) {
			return "fs"
		}
	}
	return "extent"
}

const treeLog = 1<<64 - 6

func isFSTree(id uint64) bool { return id == 5 || (id >= 256 && id < 1<<48) || id == 1<<64-9 }

func fsKeyType(t uint8) bool {
	switch t {
	case 1, 12, 13, 24, 48, 84, 96, 108: // inode, refs, xattr, orphan, dir items, file extents
		return true
	}
	return false
}

// TestCheckFsckImageKinds: where btrfs check 6.19 (GOBTRFS_PROGS_DIR)
// names the phase that found damage, ours finds damage of that kind too.
func TestCheckFsckImageKinds(t *testing.T) {
	dir := btrfstest.ProgsDir()
	if dir == "" {
		t.Skipf("%s not set: no btrfs check 6.19 to compare with", btrfstest.ProgsDirEnv)
	}
	re := regexp.MustCompile(`errors found in ([a-z ]+)`)
	for _, img := range btrfstest.FsckImages(t) {
		if img.Clean() {
			continue
		}
		t.Run(img.Name, func(t *testing.T) {
			path := btrfstest.RestoreFsckImage(t, img.Name)
			out, _ := exec.Command(filepath.Join(dir, "btrfs"), "check", "--readonly", path).CombinedOutput()
			want := map[string]bool{}
			for _, m := range re.FindAllStringSubmatch(string(out), -1) {
				if c, ok := progsCategory[strings.TrimSpace(m[1])]; ok {
					want[c] = true
				}
			}
			rep, err := check.Run(context.Background(), []string{path}, check.Options{})
			if err != nil || len(want) == 0 {
				return // progs or we could not open it, or progs names no phase
			}
			got := map[string]bool{}
			for _, p := range rep.Problems {
				got[problemCategory(p)] = true
			}
			shared := false
			for c := range want {
				shared = shared || got[c]
			}
			if !shared {
				t.Errorf("btrfs check finds %v, we find %v:\n%s", keys(want), keys(got), out)
			}
		})
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
