package dump

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// The golden test runs without btrfs-progs: testdata/golden holds what
// btrfs-progs 6.2 printed for each committed fixture image
// (testdata/images at the module root), and the JSON form gobtrfs printed,
// which pins its schema. Regenerate them, after checking the diff, with
//
//	go test ./internal/dump -run TestGolden -update
//
// which needs btrfs-progs for the text files.
var update = flag.Bool("update", false, "rewrite testdata/golden (text from btrfs-progs, JSON from this package)")

// goldenDevice replaces the image path dump-super prints, which changes
// from run to run.
const goldenDevice = "IMAGE"

// jsonGolden lists the fixtures whose JSON output is kept (one is enough
// to pin the schema; the others would only add bulk).
var jsonGolden = map[string]bool{"kernel-16k-crc32c": true}

// openForDump opens an image the way dump-tree does.
func openForDump(t *testing.T, img string) Source {
	t.Helper()
	im, err := OpenImage([]string{img}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return im
}

// oursText renders dump-tree and dump-super -f the way the commands do.
func oursText(t *testing.T, img string) (tree, super string) {
	t.Helper()
	src := openForDump(t, img)
	var b bytes.Buffer
	b.WriteString(ProgsBanner + "\n")
	o := TreeOptions{BlockOptions: BlockOptions{Location: time.UTC}}
	if err := All(&b, src, o); err != nil {
		t.Fatal(err)
	}
	tree = b.String()
	b.Reset()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw := make([]byte, disk.SuperblockSize)
	if _, err := f.ReadAt(raw, disk.SuperblockOffset); err != nil {
		t.Fatal(err)
	}
	var sb disk.Superblock
	if err := sb.Decode(raw); err != nil {
		t.Fatal(err)
	}
	if err := SuperHeader(&b, disk.SuperblockOffset, goldenDevice); err != nil {
		t.Fatal(err)
	}
	if err := Super(&b, &sb, raw, SuperOptions{Full: true}); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n")
	return tree, b.String()
}

func oursJSON(t *testing.T, img string) string {
	t.Helper()
	var b bytes.Buffer
	if err := All(&b, openForDump(t, img), TreeOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	names := btrfstest.FixtureNames(t)
	if len(names) == 0 {
		t.Skip("no fixture images in testdata/images")
	}
	dir := filepath.Join("testdata", "golden")
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			img := btrfstest.OpenFixture(t, name)
			files := map[string]func() string{}
			if *update {
				btrfstest.RequireProgs(t)
				files[".tree"] = func() string { return runProgs(t, "inspect-internal", "dump-tree", img) }
				files[".super"] = func() string {
					return strings.ReplaceAll(runProgs(t, "inspect-internal", "dump-super", "-f", img), "device="+img, "device="+goldenDevice)
				}
				if jsonGolden[name] {
					files[".json"] = func() string { return oursJSON(t, img) }
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for ext, gen := range files {
					if err := os.WriteFile(filepath.Join(dir, name+ext), []byte(gen()), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			tree, super := oursText(t, img)
			got := map[string]string{".tree": tree, ".super": super}
			if jsonGolden[name] {
				got[".json"] = oursJSON(t, img)
			}
			for ext, g := range got {
				want, err := os.ReadFile(filepath.Join(dir, name+ext))
				if err != nil {
					t.Fatalf("%v (generate the golden files with -update)", err)
				}
				if d := btrfstest.LineDiff(string(want), g); d != "" {
					t.Errorf("%s%s differs from the golden file (-want +got):\n%s", name, ext, d)
				}
			}
		})
	}
}
