package btrfstest_test

import (
	"flag"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// Flags used only by testdata/images/gen.sh, which builds this test binary
// to populate a mounted image and to write its manifest with the same code
// the tests use. Without them TestGenFixture does nothing.
var (
	genPopulate = flag.String("gen.populate", "", "gen.sh: run PopulateFixture in this directory")
	genBtrfs    = flag.Bool("gen.btrfs", false, "gen.sh: the -gen.populate directory is on btrfs")
	genScan     = flag.String("gen.scan", "", "gen.sh: Scan this directory...")
	genManifest = flag.String("gen.manifest", "", "gen.sh: ...and write the manifest here")
)

// genSeed is the seed of the committed fixtures (any fixed value will do;
// fixed so regenerating yields the same contents).
const genSeed = 20240601

// TestGenFixture is gen.sh's entry point into the harness; it skips unless
// one of the -gen.* flags is given.
func TestGenFixture(t *testing.T) {
	if *genPopulate == "" && *genScan == "" {
		t.Skip("only run by testdata/images/gen.sh")
	}
	if *genPopulate != "" {
		btrfstest.PopulateFixture(t, *genPopulate, genSeed, *genBtrfs)
	}
	if *genScan != "" {
		if *genManifest == "" {
			t.Fatal("-gen.scan needs -gen.manifest")
		}
		tree, err := btrfstest.Scan(*genScan)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Save(*genManifest); err != nil {
			t.Fatal(err)
		}
	}
}
