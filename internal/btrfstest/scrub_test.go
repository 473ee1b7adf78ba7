package btrfstest_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
)

// Outputs of btrfs-progs 6.2 `btrfs scrub start -B -R [-d]` captured on
// kernel 6.18: a clean run, uncorrectable csum errors (single data), errors
// corrected from the DUP copy (exit status 0!), and a scrub aborted on a
// read-only mount.
const (
	scrubClean = `scrub done for e51a1774-9c15-44cb-a412-2c8ef6a0b451
Scrub started:    Mon Nov 30 01:29:53 2026
Status:           finished
Duration:         0:00:00
	data_extents_scrubbed: 80
	tree_extents_scrubbed: 18
	data_bytes_scrubbed: 5242880
	tree_bytes_scrubbed: 294912
	read_errors: 0
	csum_errors: 0
	verify_errors: 0
	no_csum: 0
	csum_discards: 0
	super_errors: 0
	malloc_errors: 0
	uncorrectable_errors: 0
	unverified_errors: 0
	corrected_errors: 0
	last_physical: 72613888
`
	scrubUncorrectable = `scrub done for e51a1774-9c15-44cb-a412-2c8ef6a0b451
Scrub started:    Mon Nov 30 01:29:57 2026
Status:           finished
Duration:         0:00:00
	data_extents_scrubbed: 80
	tree_extents_scrubbed: 18
	data_bytes_scrubbed: 5242880
	tree_bytes_scrubbed: 294912
	read_errors: 0
	csum_errors: 3
	verify_errors: 0
	no_csum: 0
	csum_discards: 0
	super_errors: 0
	malloc_errors: 0
	uncorrectable_errors: 3
	unverified_errors: 0
	corrected_errors: 0
	last_physical: 139526144
ERROR: there are uncorrectable errors
`
	scrubCorrected = `
Scrub device /dev/loop0 (id 1) done
Scrub started:    Mon Nov 30 01:30:03 2026
Status:           finished
Duration:         0:00:00
	data_extents_scrubbed: 160
	tree_extents_scrubbed: 18
	data_bytes_scrubbed: 10485760
	tree_bytes_scrubbed: 294912
	read_errors: 0
	csum_errors: 2
	verify_errors: 0
	no_csum: 0
	csum_discards: 0
	super_errors: 0
	malloc_errors: 0
	uncorrectable_errors: 0
	unverified_errors: 0
	corrected_errors: 2
	last_physical: 178257920
WARNING: errors detected during scrubbing, corrected
`
	scrubAborted = `
Scrub device /dev/loop0 (id 1) canceled
Scrub started:    Mon Nov 30 01:30:19 2026
Status:           aborted
Duration:         0:00:00
	data_extents_scrubbed: 0
	tree_extents_scrubbed: 0
	data_bytes_scrubbed: 0
	tree_bytes_scrubbed: 0
	read_errors: 0
	csum_errors: 0
	verify_errors: 0
	no_csum: 0
	csum_discards: 0
	super_errors: 0
	malloc_errors: 0
	uncorrectable_errors: 0
	unverified_errors: 0
	corrected_errors: 0
	last_physical: 0
ERROR: scrubbing m failed for device id 1: ret=-1, errno=30 (Read-only file system)
`
	// scrubSummary is the output without -R: no counters to check.
	scrubSummary = `scrub done for e51a1774-9c15-44cb-a412-2c8ef6a0b451
Scrub started:    Mon Nov 30 01:29:53 2026
Status:           finished
Duration:         0:00:00
Total to scrub:   152.00MiB
Rate:             0.00B/s
Error summary:    no errors found
`
)

func TestParseScrub(t *testing.T) {
	// A second device with a read error, as -d prints for each device.
	second := strings.Replace(strings.Replace(scrubCorrected, "/dev/loop0 (id 1)", "/dev/loop7 (id 2)", 1),
		"read_errors: 0", "read_errors: 5", 1)
	second = strings.Replace(second, "csum_errors: 2", "csum_errors: 0", 1)
	second = strings.Replace(second, "corrected_errors: 2", "corrected_errors: 0", 1)
	cases := []struct {
		name, out string
		problems  []string
	}{
		{"clean", scrubClean, nil},
		{"uncorrectable", scrubUncorrectable, []string{"filesystem: csum_errors 3", "filesystem: uncorrectable_errors 3"}},
		{"corrected", scrubCorrected, []string{"/dev/loop0: corrected_errors 2", "/dev/loop0: csum_errors 2"}},
		{"aborted", scrubAborted, []string{`/dev/loop0: scrub status "aborted", want finished`}},
		{"two devices", strings.Replace(scrubClean, "scrub done for", "Scrub device /dev/loop0 (id 1) done\nx", 1) + second,
			[]string{"/dev/loop7: read_errors 5"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := btrfstest.ParseScrub(c.out)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Problems(); strings.Join(got, "\n") != strings.Join(c.problems, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.problems, "\n"))
			}
		})
	}
	r, err := btrfstest.ParseScrub(scrubClean)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Devices[0].Counters["data_bytes_scrubbed"]; n != 5242880 {
		t.Errorf("data_bytes_scrubbed %d", n)
	}
	// Output the parser cannot vouch for is an error, never "no errors".
	for name, out := range map[string]string{
		"no -R":      scrubSummary,
		"empty":      "",
		"bad number": strings.Replace(scrubClean, "csum_errors: 0", "csum_errors: many", 1),
		"no csum":    strings.Replace(scrubClean, "\tcsum_errors: 0\n", "", 1),
	} {
		if _, err := btrfstest.ParseScrub(out); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestScrubLive scrubs a kernel-written image with DUP data: clean it
// passes; with one copy of a data block overwritten Scrub fails the test
// (corrected errors count), on a read-only mount too.
func TestScrubLive(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{DataProfile: "dup"})
	dir := btrfstest.Mount(t, "", img)
	data := bytes.Repeat([]byte("scrub me "), 100000)
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sync", "-f", filepath.Join(dir, "f")).CombinedOutput(); err != nil {
		t.Fatalf("sync: %v %s", err, out)
	}
	r := btrfstest.Scrub(t, dir)
	if r.Devices[0].Counters["data_bytes_scrubbed"] < uint64(2*len(data)) {
		t.Errorf("scrub read %d data bytes, want both copies of %d", r.Devices[0].Counters["data_bytes_scrubbed"], len(data))
	}
	logical := firstExtent(t, filepath.Join(dir, "f"))
	btrfstest.Unmount(t, dir)

	phys := mirrorOne(t, img, logical)
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 8192), phys); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, opts := range []string{"ro", ""} {
		dir = btrfstest.Mount(t, opts, img)
		rec := record(t, func(tb testing.TB) { btrfstest.Scrub(tb, dir) })
		if !rec.failed || !strings.Contains(rec.msg, "csum_errors 2") {
			t.Errorf("mount %q: Scrub of a damaged copy: failed=%v %s", opts, rec.failed, rec.msg)
		}
		btrfstest.Unmount(t, dir)
	}
}

// firstExtent is the logical address of the first extent of a file, from
// filefrag (which reports btrfs logical addresses in blocks).
func firstExtent(t *testing.T, path string) int64 {
	t.Helper()
	out, err := exec.Command("filefrag", "-v", "-b4096", path).CombinedOutput()
	if err != nil {
		btrfstest.SkipOrFail(t, fmt.Sprintf("filefrag: %v %s", err, out))
	}
	m := regexp.MustCompile(`(?m)^\s*0:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("filefrag output:\n%s", out)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n * 4096
}

// mirrorOne maps a logical address to the image offset of its first copy.
func mirrorOne(t *testing.T, img string, logical int64) int64 {
	t.Helper()
	out, err := exec.Command("btrfs-map-logical", "-l", fmt.Sprint(logical), img).CombinedOutput()
	if err != nil {
		btrfstest.SkipOrFail(t, fmt.Sprintf("btrfs-map-logical: %v %s", err, out))
	}
	m := regexp.MustCompile(`mirror 1 logical \d+ physical (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("btrfs-map-logical output:\n%s", out)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}
