package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/bench"
)

// runBench runs the bench command with args and returns its output.
func runBench(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewBenchCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestBenchCtreeTable(t *testing.T) {
	out, err := runBench(t, "ctree", "--ops", "3000", "--streams", "16", "--commit-every", "500", "--verify")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"workload interleaved: 3000 ops, 16 streams", "shortcut on", "push_leaf_right_shortcut", "avg_leaf_fill", "blocks_written"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchCtreeCompareJSON(t *testing.T) {
	out, err := runBench(t, "ctree", "--workload", "random", "--ops", "2000", "--nodesize", "4096",
		"--item-size", "100", "--commit-every", "300", "--compare", "--json", "--verify")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var runs []map[string]any
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out)
	}
	if len(runs) != 2 || runs[0]["shortcut"] != true || runs[1]["shortcut"] != false {
		t.Fatalf("runs: %v", runs)
	}
	for _, name := range []string{"ops", "seconds", "ops_per_sec", "split_leaf", "push_leaf_right",
		"push_leaf_right_shortcut", "push_leaf_left", "items_moved", "bytes_moved", "leaf_splits",
		"node_splits", "merges", "blocks_cowed", "blocks_allocated", "leaves", "nodes", "height",
		"avg_leaf_fill", "blocks_written"} {
		if _, ok := runs[0][name]; !ok {
			t.Errorf("JSON lacks %q", name)
		}
	}
	if runs[1]["push_leaf_right_shortcut"].(float64) != 0 {
		t.Errorf("shortcut taken with the shortcut off")
	}
}

func TestBenchCtreeCompareTable(t *testing.T) {
	out, err := runBench(t, "ctree", "--workload", "append", "--ops", "2000", "--compare")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "shortcut on") || !strings.Contains(out, "shortcut off") || !strings.Contains(out, "on/off") {
		t.Errorf("no side-by-side columns:\n%s", out)
	}
}

func TestBenchCtreeJSONSingle(t *testing.T) {
	out, err := runBench(t, "ctree", "--workload", "delete", "--ops", "1500", "--json", "--no-push-right-shortcut")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Shortcut || r.Ops != 1500 || r.Workload != "delete" || r.Items != 0 || r.Merges == 0 {
		t.Errorf("result %+v", r)
	}
}

func TestBenchCtreeBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"ctree", "--workload", "nope"},
		{"ctree", "--nodesize", "5000"},
		{"ctree", "--ops", "0"},
		{"ctree", "--item-size", "99999"},
		{"ctree", "--commit-every", "0"},
		{"ctree", "extra"},
		{},
	} {
		if out, err := runBench(t, args...); err == nil {
			t.Errorf("%v: no error\n%s", args, out)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	out, err := runBench(t, "ctree", "--help")
	if err != nil || !strings.Contains(out, "--no-push-right-shortcut") || !strings.Contains(out, "interleaved") {
		t.Errorf("help: %v\n%s", err, out)
	}
}
