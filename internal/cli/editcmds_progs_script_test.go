package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestProgsWordsInScript runs chattr, lsattr, setfacl and getfacl as
// lines of `gobtrfs edit`, where paths are inside the image.
func TestProgsWordsInScript(t *testing.T) {
	btrfstest.RequireProgs(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	script := filepath.Join(t.TempDir(), "script")
	lines := `mkdir /d
touch /d/f
chattr +d +A /d/f
setfacl -m u:1234:rx /d/f
commit
lsattr /d
getfacl -n /d/f
`
	if err := os.WriteFile(script, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	out := ok(t, "edit", "-f", script, img)
	want := "------dA-------------- /d/f\n" +
		"# file: d/f\n# owner: 0\n# group: 0\nuser::rw-\nuser:1234:r-x\ngroup::r--\nmask::r-x\nother::r--\n\n"
	if out != want {
		t.Errorf("script output:\n%s\nwant:\n%s", out, want)
	}
	btrfstest.Check(t, []string{img}, false)
}
