package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// row is one line of the human-readable table.
type row struct {
	name string
	get  func(Result) float64
	prec int // decimals; -1 for a percentage
}

func intRow(name string, get func(Result) int64) row {
	return row{name: name, get: func(r Result) float64 { return float64(get(r)) }}
}

var rows = []row{
	{name: "ops", get: func(r Result) float64 { return float64(r.Ops) }},
	{name: "seconds", get: func(r Result) float64 { return r.Seconds }, prec: 3},
	{name: "ops_per_sec", get: func(r Result) float64 { return r.OpsPerSec }},
	intRow("split_leaf", func(r Result) int64 { return r.SplitLeaf }),
	intRow("push_leaf_right", func(r Result) int64 { return r.PushLeafRight }),
	intRow("push_leaf_right_shortcut", func(r Result) int64 { return r.PushLeafRightShortcut }),
	{name: "shortcut_share", get: func(r Result) float64 { return r.ShortcutShare }, prec: -1},
	intRow("push_leaf_right_at_end", func(r Result) int64 { return r.PushLeafRightAtEnd }),
	intRow("push_leaf_right_at_end_no_sibling", func(r Result) int64 { return r.PushLeafRightAtEndNoSibling }),
	intRow("push_leaf_right_at_end_no_room", func(r Result) int64 { return r.PushLeafRightAtEndNoRoom }),
	intRow("push_leaf_left", func(r Result) int64 { return r.PushLeafLeft }),
	intRow("items_moved", func(r Result) int64 { return r.ItemsMoved }),
	intRow("bytes_moved", func(r Result) int64 { return r.BytesMoved }),
	intRow("leaf_splits", func(r Result) int64 { return r.LeafSplits }),
	intRow("double_splits", func(r Result) int64 { return r.DoubleSplits }),
	intRow("node_splits", func(r Result) int64 { return r.NodeSplits }),
	intRow("merges", func(r Result) int64 { return r.Merges }),
	intRow("blocks_cowed", func(r Result) int64 { return r.BlocksCowed }),
	intRow("blocks_allocated", func(r Result) int64 { return r.BlocksAllocated }),
	intRow("blocks_freed", func(r Result) int64 { return r.BlocksFreed }),
	intRow("blocks_written", func(r Result) int64 { return r.BlocksWritten }),
	{name: "leaves", get: func(r Result) float64 { return float64(r.Leaves) }},
	{name: "nodes", get: func(r Result) float64 { return float64(r.Nodes) }},
	{name: "height", get: func(r Result) float64 { return float64(r.Height) }},
	{name: "items", get: func(r Result) float64 { return float64(r.Items) }},
	{name: "avg_leaf_fill", get: func(r Result) float64 { return r.AvgLeafFill }, prec: -1},
}

func (rw row) format(r Result) string {
	v := rw.get(r)
	switch {
	case rw.prec < 0:
		return fmt.Sprintf("%.1f%%", 100*v)
	case rw.prec > 0:
		return fmt.Sprintf("%.*f", rw.prec, v)
	}
	return fmt.Sprintf("%.0f", v)
}

// Describe is a one-line summary of a configuration.
func Describe(c Config) string {
	s := fmt.Sprintf("workload %s: %d ops", c.Workload, c.Ops)
	if c.Workload == Interleaved {
		s += fmt.Sprintf(", %d streams", c.Streams)
	}
	return s + fmt.Sprintf(", nodesize %d, item size %d, commit every %d, seed %d",
		c.NodeSize, c.ItemSize, c.CommitEvery, c.Seed)
}

// WriteTable prints one result as a two-column table.
func WriteTable(w io.Writer, c Config, r Result) error {
	fmt.Fprintf(w, "%s, shortcut %s\n\n", Describe(c), onOff(r.Shortcut))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, rw := range rows {
		fmt.Fprintf(tw, "%s\t%s\t\n", rw.name, rw.format(r))
	}
	return tw.Flush()
}

// WriteComparison prints two runs side by side, shortcut on then off, with
// the ratio on/off of each figure.
func WriteComparison(w io.Writer, c Config, on, off Result) error {
	fmt.Fprintf(w, "%s\n\n", Describe(c))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tshortcut on\tshortcut off\ton/off\t\n")
	for _, rw := range rows {
		a, b := rw.get(on), rw.get(off)
		ratio := "-"
		if b != 0 {
			ratio = fmt.Sprintf("%.3f", a/b)
		} else if a == 0 {
			ratio = "="
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", rw.name, rw.format(on), rw.format(off), ratio)
	}
	return tw.Flush()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Names returns the row names of the table, for help text and tests.
func Names() string {
	var names []string
	for _, rw := range rows {
		names = append(names, rw.name)
	}
	return strings.Join(names, ", ")
}
