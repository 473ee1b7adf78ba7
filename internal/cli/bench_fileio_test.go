package cli

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/fileio"
)

// configFromArgs parses args as the command's flags and returns the
// configuration the command would run.
func configFromArgs(args []string) (fileio.Config, error) {
	fl := newFileioFlags()
	f := pflag.NewFlagSet("fileio", pflag.ContinueOnError)
	fl.bind(f)
	if err := f.Parse(args); err != nil {
		return fileio.Config{}, err
	}
	return fl.config("img")
}

func TestBenchFileioFlags(t *testing.T) {
	c, err := configFromArgs([]string{"--file-num", "512", "--file-total-size", "1G", "--file-block-size", "8K",
		"--file-test-mode", "rndwr", "--file-fsync-freq", "100", "--file-rw-ratio", "2", "--threads", "512",
		"--events", "1000", "--time", "0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.FileNum != 512 || c.FileTotalSize != 1<<30 || c.FileBlockSize != 8192 || c.Mode != "rndwr" ||
		c.FsyncFreq != 100 || c.RWRatio != 2 || c.Threads != 512 || c.Events != 1000 || c.Time >= 0 || c.NoFsyncEnd {
		t.Errorf("config %+v", c)
	}
	c, err = configFromArgs([]string{"--file-test-mode", "seqwr", "--file-fsync-freq", "0", "--file-fsync-end=off"})
	if err != nil {
		t.Fatal(err)
	}
	if c.FsyncFreq >= 0 || !c.NoFsyncEnd || c.Time != 10*time.Second || c.FileNum != 128 || c.FileBlockSize != 16384 ||
		c.FileTotalSize != 2<<30 || c.Threads != 1 || c.RWRatio != 1.5 {
		t.Errorf("sysbench's 0 and off, and its defaults: %+v", c)
	}
	c, err = configFromArgs([]string{"--file-test-mode", "seqwr", "--file-fsync-end"})
	if err != nil || c.NoFsyncEnd {
		t.Errorf("--file-fsync-end alone: %+v, %v", c, err)
	}
	for _, bad := range [][]string{
		{},
		{"--file-test-mode", "write"},
		{"--file-test-mode", "rndwr", "--file-block-size", "8Q"},
		{"--file-test-mode", "rndwr", "--file-total-size", "-1G"},
		{"--file-test-mode", "rndwr", "--threads", "0"},
		{"--file-test-mode", "rndwr", "--time", "0"},
		{"--file-test-mode", "rndwr", "--compare", "--no-push-right-shortcut"},
		{"--file-test-mode", "rndwr", "--file-fsync-end=maybe"},
		{"--file-test-mode", "rndwr", "--file-rw-ratio", "0"},
	} {
		if c, err := configFromArgs(bad); err == nil {
			t.Errorf("%q accepted: %+v", bad, c)
		}
	}
}

func TestBenchFileioHelp(t *testing.T) {
	out, err := runBench(t, "fileio", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--file-test-mode", "--file-fsync-freq", "--compare", "--plot", "Differences from sysbench"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// smallFileio are the flags of a small verified run: 8 files, 4 MiB, 8
// threads, a few hundred events, fsync every 50 requests.
func smallFileio(img, mode string, more ...string) []string {
	return append([]string{"fileio", img, "--file-num", "8", "--file-total-size", "4M", "--file-block-size", "4K",
		"--file-test-mode", mode, "--threads", "8", "--events", "300", "--time", "0", "--file-fsync-freq", "50",
		"--verify"}, more...)
}

// checkFileioRun checks one run's JSON object: every field there, and
// counters that add up.
func checkFileioRun(t *testing.T, raw map[string]json.RawMessage, mode string) fileio.Result {
	t.Helper()
	for _, name := range []string{"shortcut", "mode", "threads", "seconds", "written_mib_per_s", "read_mib_per_s",
		"requests_per_s", "fsyncs_per_s", "latency_ms", "commits", "log_syncs", "device_bytes_written", "peak_heap_bytes", "trees", "total"} {
		if _, ok := raw[name]; !ok {
			t.Errorf("JSON lacks %q", name)
		}
	}
	var lat map[string]float64
	if err := json.Unmarshal(raw["latency_ms"], &lat); err != nil || len(lat) != 3 {
		t.Errorf("latency_ms %s: %v", raw["latency_ms"], err)
	}
	counters := []string{"split_leaf", "push_leaf_right", "push_leaf_right_shortcut", "push_leaf_right_not_at_end",
		"push_leaf_right_at_end_no_sibling", "push_leaf_right_at_end_no_room", "push_leaf_right_at_end_shortcut_off",
		"push_leaf_left", "items_moved", "bytes_moved", "leaf_splits", "node_splits", "blocks_cowed", "blocks_written"}
	var trees map[string]map[string]int64
	if err := json.Unmarshal(raw["trees"], &trees); err != nil {
		t.Fatal(err)
	}
	var total map[string]int64
	if err := json.Unmarshal(raw["total"], &total); err != nil {
		t.Fatal(err)
	}
	for _, c := range counters {
		sum := int64(0)
		for name, tr := range trees {
			v, ok := tr[c]
			if !ok {
				t.Errorf("tree %s lacks %q", name, c)
			}
			sum += v
		}
		if total[c] != sum {
			t.Errorf("total %s = %d, trees add up to %d", c, total[c], sum)
		}
	}
	for name, tr := range trees {
		if tr["push_leaf_right_shortcut"] > tr["push_leaf_right"] || tr["push_leaf_right"] > tr["split_leaf"] {
			t.Errorf("tree %s: shortcut %d, push_leaf_right %d, split_leaf %d", name,
				tr["push_leaf_right_shortcut"], tr["push_leaf_right"], tr["split_leaf"])
		}
		reasons := tr["push_leaf_right_shortcut"] + tr["push_leaf_right_not_at_end"] + tr["push_leaf_right_at_end_no_sibling"] +
			tr["push_leaf_right_at_end_no_room"] + tr["push_leaf_right_at_end_shortcut_off"]
		if reasons != tr["push_leaf_right"] {
			t.Errorf("tree %s: reasons add up to %d, push_leaf_right %d", name, reasons, tr["push_leaf_right"])
		}
	}
	var r fileio.Result
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Mode != mode || r.Threads != 8 || r.Events != 300 {
		t.Errorf("mode %s threads %d events %d", r.Mode, r.Threads, r.Events)
	}
	writes := mode != fileio.SeqRd && mode != fileio.RndRd
	// The fsyncs of a run of writes go to the tree log (the run's own
	// writes are all data writes to files the prepare phase committed).
	if writes != (r.Writes > 0 && r.LogSyncs > 0 && r.DeviceBytesWritten >= r.BytesWritten && r.Total.BlocksWritten > 0) {
		t.Errorf("%s: writes %d, log syncs %d, device bytes %d, blocks written %d", mode, r.Writes, r.LogSyncs,
			r.DeviceBytesWritten, r.Total.BlocksWritten)
	}
	if !writes && (r.LogSyncs != 0 || r.Commits != 0) {
		t.Errorf("%s: %d log syncs and %d commits in a run without writes", mode, r.LogSyncs, r.Commits)
	}
	if reads := mode == fileio.SeqRd || mode == fileio.RndRd || mode == fileio.RndRw; reads != (r.Reads > 0) {
		t.Errorf("%s: %d reads", mode, r.Reads)
	}
	if _, ok := r.LatencyByOpMS["write"]; ok != writes {
		t.Errorf("%s: write latency %v", mode, r.LatencyByOpMS)
	}
	if writes && r.FsyncsAtEnd != 8*8 {
		t.Errorf("%s: %d fsyncs at the end, want threads x files = 64", mode, r.FsyncsAtEnd)
	}
	if r.PeakHeapBytes == 0 || r.Seconds <= 0 || len(r.Throughput) == 0 {
		t.Errorf("peak heap %d, seconds %f, %d samples", r.PeakHeapBytes, r.Seconds, len(r.Throughput))
	}
	return r
}

// TestBenchFileioModes runs every mode through the command on a fresh
// image (made and prepared by the command): the JSON has every field, the
// counters add up, the files hold what the run wrote (--verify checks
// every file against its model) and btrfs check finds the image clean.
func TestBenchFileioModes(t *testing.T) {
	for _, mode := range fileio.Modes {
		t.Run(mode, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "fio.img")
			out, err := runBench(t, append(smallFileio(img, mode), "--json")...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			// Standard error (the prepare line) shares the buffer.
			obj := out[strings.Index(out, "{"):]
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(obj), &raw); err != nil {
				t.Fatalf("not one JSON object: %v\n%s", err, out)
			}
			checkFileioRun(t, raw, mode)
			btrfstest.Check(t, []string{img}, true)
		})
	}
}

// TestBenchFileioCompare: two runs from byte-identical prepared images,
// the shortcut taken only in the first; the table, and the plot.
func TestBenchFileioCompare(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "fio.img")
	svg := filepath.Join(dir, "fio.svg")
	out, err := runBench(t, append(smallFileio(img, fileio.RndWr), "--compare", "--json", "--keep-copy", "--plot", svg)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var raws []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &raws); err != nil || len(raws) != 2 {
		t.Fatalf("not an array of two runs: %v\n%s", err, out)
	}
	on, off := checkFileioRun(t, raws[0], fileio.RndWr), checkFileioRun(t, raws[1], fileio.RndWr)
	if !on.Shortcut || off.Shortcut {
		t.Errorf("shortcut flags %v, %v", on.Shortcut, off.Shortcut)
	}
	if on.PreparedCRC32C == "" || on.PreparedCRC32C != off.PreparedCRC32C {
		t.Errorf("prepared images %q and %q", on.PreparedCRC32C, off.PreparedCRC32C)
	}
	if off.Total.PushLeafRightShortcut != 0 {
		t.Errorf("shortcut taken %d times with it off", off.Total.PushLeafRightShortcut)
	}
	if on.Image == off.Image {
		t.Errorf("both runs changed %s", on.Image)
	}
	btrfstest.Check(t, []string{img}, true)
	btrfstest.Check(t, []string{img + ".noshortcut"}, true)

	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name
	}
	if err := xml.Unmarshal(data, &doc); err != nil || doc.XMLName.Local != "svg" {
		t.Errorf("plot is not SVG: %v", err)
	}
	for _, want := range []string{"shortcut on", "shortcut off", "all trees", "Throughput", "polyline"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

// TestBenchFileioTable: the human report of a run on an image prepared
// before (the files are reused; a read-only run leaves them as prepared,
// as --verify's model expects).
func TestBenchFileioTable(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fio.img")
	if out, err := runBench(t, smallFileio(img, fileio.SeqRd)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := runBench(t, smallFileio(img, fileio.RndRw)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"fileio rndrw: 8 files, 512K each (4M), 4K requests, 8 threads, fsync every 50 requests",
		"8 reused", "shortcut on", "written MiB/s", "latency ms p50 / p95 / p99", "write latency ms", "read latency ms", "fsync latency ms", "fsyncs at the end", "write amplification", "push_leaf_right", "total"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchFileioNoTreeLog: with --notreelog every fsync commits.
func TestBenchFileioNoTreeLog(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fio.img")
	out, err := runBench(t, append(smallFileio(img, fileio.RndWr), "--notreelog", "--json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r fileio.Result
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
		t.Fatal(err)
	}
	if r.LogSyncs != 0 || r.Commits == 0 {
		t.Errorf("--notreelog: %d log syncs, %d commits", r.LogSyncs, r.Commits)
	}
	btrfstest.Check(t, []string{img}, true)
}

// TestBenchFileioLogRebuild: with --log-rebuild every fsync logs its
// file's items again; the run verifies every block through a read-only
// open that replays the log, and the image is clean.
func TestBenchFileioLogRebuild(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fio.img")
	out, err := runBench(t, append(smallFileio(img, fileio.RndWr), "--log-rebuild", "--json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r fileio.Result
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
		t.Fatal(err)
	}
	if r.LogSyncs == 0 {
		t.Errorf("--log-rebuild: %d log syncs", r.LogSyncs)
	}
	btrfstest.Check(t, []string{img}, true)
}
