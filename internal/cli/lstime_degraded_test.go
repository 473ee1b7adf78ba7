package cli

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// TestLsLocalTime checks that ls -l shows times in the local time zone,
// in ls(1)'s two forms (time of day within six months, else the year).
// It changes time.Local, so it must not run in parallel with others.
func TestLsLocalTime(t *testing.T) {
	img := editImage(t)
	at := func(p string) string { return img + ":" + p }
	recent := time.Now().Add(-time.Hour).Truncate(time.Second)
	mustRun(t, ExitOK, "touch", "-d", "2024-05-06 23:40:09", at("old"))
	mustRun(t, ExitOK, "touch", "-d", "@"+strconv.FormatInt(recent.Unix(), 10), at("new"))
	saved := time.Local
	time.Local = time.FixedZone("X", 5*3600+30*60)
	defer func() { time.Local = saved }()
	out := mustRun(t, ExitOK, "ls", "-l", "--full-time", at("old"))
	if !strings.Contains(out, " 2024-05-07 05:10:09.000000000 +0530 /old\n") {
		t.Errorf("ls --full-time in +05:30:\n%s", out)
	}
	out = mustRun(t, ExitOK, "ls", "-l", img)
	wantNew := recent.In(time.Local).Format("Jan _2 15:04") + " new\n"
	if !strings.Contains(out, " May  7  2024 old\n") || !strings.Contains(out, wantNew) {
		t.Errorf("ls -l in +05:30:\n%s\nwant %q and %q", out, "May  7  2024 old", wantNew)
	}
}

// TestDegradedReadWarns reads a two-device RAID1 filesystem from one
// device: it works, with btrfs-progs' warning; a change is refused
// naming the missing device.
func TestDegradedReadWarns(t *testing.T) {
	devs := btrfstest.MkfsMulti(t, btrfstest.MkfsOptions{DataProfile: "raid1", MetadataProfile: "raid1"})
	mustRun(t, ExitOK, "mkdir", "--device", devs[1], devs[0]+":/d")
	out, stderr, code := run(t, "ls", devs[0])
	if code != ExitOK || out != "d\n" || stderr != "gobtrfs ls: warning, device 2 is missing\n" {
		t.Errorf("degraded ls: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, stderr, _ := run(t, "ls", "--device", devs[1], devs[0]); stderr != "" {
		t.Errorf("complete ls warned: %q", stderr)
	}
	_, stderr, code = run(t, "mkdir", devs[0]+":/e")
	want := "gobtrfs mkdir: " + devs[0] + ": device 2 missing: changes need every device (name the others with --device)\n"
	if code != ExitFailure || stderr != want {
		t.Errorf("degraded mkdir: exit %d, stderr %q, want %q", code, stderr, want)
	}
}
