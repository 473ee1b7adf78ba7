package dump

import (
	"fmt"
	"strconv"
	"strings"
)

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// lineDiff compares two outputs line by line and describes the first
// difference with some context, or returns "" if they are equal. Whole
// dumps are too long for a full diff in a test log.
func lineDiff(want, got string) string {
	if want == got {
		return ""
	}
	w, g := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (want %d lines, got %d)\n", i+1, len(w), len(g))
	from := max(0, i-3)
	for j := from; j < i; j++ {
		fmt.Fprintf(&b, "  %q\n", w[j])
	}
	for j := i; j < min(len(w), i+4); j++ {
		fmt.Fprintf(&b, "- %q\n", w[j])
	}
	for j := i; j < min(len(g), i+4); j++ {
		fmt.Fprintf(&b, "+ %q\n", g[j])
	}
	return b.String()
}
