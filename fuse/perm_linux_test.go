//go:build linux

package fuse_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs/fuse"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// syncBuffer is a bytes.Buffer that go-fuse's request goroutines may log
// into at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMountRootOnly covers a mount by root for root alone (no allow_other,
// no default_permissions), where the kernel does no permission checks and
// no ACL handling of its own (kernelChecks): ACLs set and inherited
// through it are still the kernel btrfs's (the btrfs package does both),
// and creating or removing a name no longer makes the kernel ask for the
// directory's attributes before the next name (one GETATTR per file with
// the checks on).
func TestMountRootOnly(t *testing.T) {
	requireFUSE(t)
	if os.Getuid() != 0 || os.Geteuid() != 0 {
		t.Skip("needs root: other users' mounts keep the kernel's checks")
	}
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Skip("setfacl not installed")
	}
	run := func(dir, script string) {
		t.Helper()
		// sh changes into dir itself: see runACLScripts.
		cmd := exec.Command("sh", "-c", `cd "$0" || exit 1`+"\n"+script, dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("script in %s: %v\n%s", dir, err, out)
		}
	}
	kdir := btrfstest.Mount(t, "", btrfstest.Mkfs(t, btrfstest.MkfsOptions{}))
	run(kdir, aclScript)
	want := aclView(t, kdir)

	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	var logBuf syncBuffer
	m := mountImage(t, img, &fuse.Options{Debug: true, Logger: log.New(&logBuf, "", 0)}, nil)
	run(m.dir, aclScript)
	if got := aclView(t, m.dir); got != want {
		t.Errorf("our mount differs from the kernel's:\n%s", btrfstest.LineDiff(want, got))
	}

	// Requests for making and removing files one at a time in one
	// directory, as tar and rm -rf do.
	const files = 100
	dir := filepath.Join(m.dir, "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := len(logBuf.String())
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range files {
		if err := os.Remove(filepath.Join(dir, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	reqs := logBuf.String()[start:]
	getattrs := len(regexp.MustCompile(`(?m)rx \d+: GETATTR `).FindAllString(reqs, -1))
	creates := len(regexp.MustCompile(`(?m)rx \d+: CREATE `).FindAllString(reqs, -1))
	unlinks := len(regexp.MustCompile(`(?m)rx \d+: UNLINK `).FindAllString(reqs, -1))
	t.Logf("%d files made and removed: %d CREATE, %d UNLINK, %d GETATTR", files, creates, unlinks, getattrs)
	if creates != files || unlinks != files {
		t.Fatalf("counted %d CREATE and %d UNLINK requests for %d files: the log format changed?", creates, unlinks, files)
	}
	if getattrs > files/10 {
		t.Errorf("%d GETATTR requests for %d files made and removed one at a time; want at most %d", getattrs, files, files/10)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	btrfstest.Check(t, []string{img}, false)
	if got := aclView(t, btrfstest.Mount(t, "ro", img)); got != want {
		t.Errorf("the kernel's mount of our image differs:\n%s", btrfstest.LineDiff(want, got))
	}
}
