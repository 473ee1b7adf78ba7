package btrfstest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// ScrubDevice is what `btrfs scrub start -B -d -R` reported for one
// device: its name, the final status and every raw counter.
type ScrubDevice struct {
	// Name is the device path of the "Scrub device ... done" line ("" when
	// the output was for the whole filesystem, without -d).
	Name string
	// Status is the "Status:" line's value, "finished" for a complete scrub.
	Status string
	// Counters are the raw "name: value" statistics (csum_errors,
	// data_bytes_scrubbed, ...).
	Counters map[string]uint64
}

// ScrubReport is a parsed scrub run, one entry per device.
type ScrubReport struct {
	Devices []ScrubDevice
}

// scrubNotErrors are the raw counters ending in _errors that do not mean
// a problem; none today, kept as the one place to record an exception.
var scrubNotErrors = map[string]bool{}

// Problems lists, one line each, every error counter above zero and every
// device whose scrub did not finish. Corrected errors are problems too:
// a correct image has nothing to correct, and with DUP or RAID the kernel
// repairs silently (exit status 0).
func (r *ScrubReport) Problems() []string {
	var out []string
	for _, d := range r.Devices {
		name := d.Name
		if name == "" {
			name = "filesystem"
		}
		if d.Status != "finished" {
			out = append(out, fmt.Sprintf("%s: scrub status %q, want finished", name, d.Status))
		}
		var keys []string
		for k := range d.Counters {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if strings.HasSuffix(k, "_errors") && !scrubNotErrors[k] && d.Counters[k] > 0 {
				out = append(out, fmt.Sprintf("%s: %s %d", name, k, d.Counters[k]))
			}
		}
	}
	return out
}

// ParseScrub reads the output of `btrfs scrub start -B -R` (with or
// without -d) of btrfs-progs 6.x. It fails on output without any counter
// block or with a counter that is not a number, so a changed format cannot
// pass as "no errors".
func ParseScrub(out string) (*ScrubReport, error) {
	r := &ScrubReport{}
	var cur *ScrubDevice
	start := func(name string) {
		r.Devices = append(r.Devices, ScrubDevice{Name: name, Counters: map[string]uint64{}})
		cur = &r.Devices[len(r.Devices)-1]
	}
	for i, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "Scrub device "):
			// "Scrub device /dev/loop0 (id 1) done" (or "canceled").
			start(strings.Fields(trimmed)[2])
		case strings.HasPrefix(trimmed, "scrub done for "):
			start("")
		case cur == nil || trimmed == "":
		case strings.HasPrefix(trimmed, "Status:"):
			cur.Status = strings.TrimSpace(strings.TrimPrefix(trimmed, "Status:"))
		case strings.HasPrefix(line, "\t"):
			k, v, ok := strings.Cut(trimmed, ":")
			if !ok {
				return nil, fmt.Errorf("scrub output line %d: no counter in %q", i+1, line)
			}
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("scrub output line %d: counter %q: %v", i+1, k, err)
			}
			cur.Counters[strings.TrimSpace(k)] = n
		}
	}
	if len(r.Devices) == 0 {
		return nil, fmt.Errorf("scrub output has no report:\n%s", out)
	}
	for _, d := range r.Devices {
		if len(d.Counters) == 0 {
			return nil, fmt.Errorf("scrub output has no raw counters for %q (run with -R):\n%s", d.Name, out)
		}
		if _, ok := d.Counters["csum_errors"]; !ok {
			return nil, fmt.Errorf("scrub output lacks csum_errors for %q:\n%s", d.Name, out)
		}
	}
	return r, nil
}

// Scrub runs `btrfs scrub start -B -d -R -r` on the filesystem mounted at
// mountDir and fails the test when any error counter of any device is
// above zero, the scrub did not finish, or the tool failed. It returns the
// parsed report for further assertions.
//
// -r (report, never repair) works on read-only mounts too, where a
// repairing scrub aborts with EROFS, and leaves the image as the code
// under test wrote it.
func Scrub(tb testing.TB, mountDir string) *ScrubReport {
	tb.Helper()
	RequireInterop(tb)
	out, runErr := runCmd("btrfs", "scrub", "start", "-B", "-d", "-R", "-r", mountDir)
	r, err := ParseScrub(out)
	if err != nil {
		if runErr != nil {
			tb.Fatal(runErr)
		}
		tb.Fatal(err)
	}
	if p := r.Problems(); len(p) > 0 {
		tb.Fatalf("btrfs scrub of %s found errors:\n%s\n%s%s", mountDir, strings.Join(p, "\n"), out, kernelLog())
	}
	if runErr != nil {
		tb.Fatalf("btrfs scrub failed without error counts: %v", runErr)
	}
	return r
}
