package btrfstest_test

import (
	"os"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestFsckImagesRestore restores every committed fsck test image and asks
// the installed btrfs check for its verdict, which must be the one recorded
// for 6.2 (the version the project's machines install): the list and the
// restore step are what the check and write tests over these images stand on.
func TestFsckImagesRestore(t *testing.T) {
	imgs := btrfstest.FsckImages(t)
	if len(imgs) != 79 {
		t.Fatalf("%d fsck images listed, want 79", len(imgs))
	}
	for _, img := range imgs {
		t.Run(img.Name, func(t *testing.T) {
			if _, err := os.Stat(btrfstest.FsckDir(t) + "/" + img.Name + ".zst"); err != nil {
				t.Fatal(err)
			}
			p := btrfstest.RestoreFsckImage(t, img.Name)
			btrfstest.RequireProgs(t)
			got := btrfstest.CheckStatus(t, p)
			if got != img.Check62 {
				t.Errorf("btrfs check --readonly exit %d, verdicts.txt says %d for 6.2", got, img.Check62)
			}
		})
	}
}
