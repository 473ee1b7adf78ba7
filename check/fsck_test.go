package check_test

import (
	"context"
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
