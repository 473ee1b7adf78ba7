package btrfstest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HoleGranularity is the block size at which Diff compares data maps. Two
// filesystems (or one filesystem before and after writeback) may report a
// hole boundary anywhere inside a block, so ranges are widened to whole
// 4 KiB blocks before comparing.
const HoleGranularity = 4096

// DiffOptions relaxes Diff for comparisons where some facts cannot match.
// The zero value compares everything Diff knows about. Atime and ctime are
// never recorded, inode numbers never compared, directory sizes never
// compared (they are filesystem-specific), and the mtime of a btrfs
// placeholder directory (see Entry.Placeholder) never compared.
type DiffOptions struct {
	// IgnoreOwners skips uid/gid, e.g. for a tree extracted by a non-root
	// user.
	IgnoreOwners bool
	// IgnoreHoles skips the data/hole maps of regular files (contents are
	// still compared by digest).
	IgnoreHoles bool
	// IgnoreDirMtime skips directory mtimes, for extractions that cannot
	// restore them.
	IgnoreDirMtime bool
	// CompareNlink also compares link counts of non-directories. Only
	// meaningful when both trees hold every link of every inode.
	CompareNlink bool
	// IgnoreXattr, if set, drops the xattrs for which it returns true (e.g.
	// security.selinux added by the host).
	IgnoreXattr func(name string) bool
	// Filter, if set, restricts the comparison (entries and hardlink groups)
	// to the paths for which it returns true.
	Filter func(path string) bool
}

func (o *DiffOptions) keep(p string) bool { return o.Filter == nil || o.Filter(p) }

// Diff compares two trees and returns one human-readable line per
// difference, sorted by path; an empty result means equal. want is usually
// what the kernel showed, got what our code produced.
func Diff(want, got *Tree, opts DiffOptions) []string {
	var out []string
	seen := map[string]bool{}
	var paths []string
	for _, t := range []*Tree{want, got} {
		for p := range t.Entries {
			if !seen[p] && opts.keep(p) {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		w, g := want.Entries[p], got.Entries[p]
		switch {
		case g == nil:
			out = append(out, fmt.Sprintf("%q: missing (want %s)", p, w.Type))
		case w == nil:
			out = append(out, fmt.Sprintf("%q: unexpected %s", p, g.Type))
		default:
			out = append(out, diffEntry(w, g, &opts)...)
		}
	}
	return append(out, diffLinks(want, got, &opts)...)
}

// diffEntry compares two entries of the same path.
func diffEntry(w, g *Entry, o *DiffOptions) []string {
	var out []string
	add := func(field string, want, got any) {
		out = append(out, fmt.Sprintf("%q: %s: want %v, got %v", w.Path, field, want, got))
	}
	if w.Type != g.Type {
		add("type", w.Type, g.Type)
		return out
	}
	if w.Perm != g.Perm {
		add("perm", fmt.Sprintf("%04o", w.Perm), fmt.Sprintf("%04o", g.Perm))
	}
	if !o.IgnoreOwners && (w.UID != g.UID || w.GID != g.GID) {
		add("owner", fmt.Sprintf("%d:%d", w.UID, w.GID), fmt.Sprintf("%d:%d", g.UID, g.GID))
	}
	volatile := w.Placeholder || g.Placeholder || (o.IgnoreDirMtime && w.Type == TypeDir)
	if w.MtimeNs != g.MtimeNs && !volatile {
		add("mtime", fmtTime(w.MtimeNs), fmtTime(g.MtimeNs))
	}
	if o.CompareNlink && w.Type != TypeDir && w.Nlink != g.Nlink {
		add("nlink", w.Nlink, g.Nlink)
	}
	switch w.Type {
	case TypeRegular:
		if w.Size != g.Size {
			add("size", w.Size, g.Size)
		}
		if w.SHA256 != g.SHA256 {
			add("content sha256", w.SHA256, g.SHA256)
		}
		if !o.IgnoreHoles {
			wb, gb := blockRanges(w.Data, w.Size), blockRanges(g.Data, g.Size)
			if fmtRanges(wb) != fmtRanges(gb) {
				add("data ranges (4K blocks)", fmtRanges(wb), fmtRanges(gb))
			}
		}
	case TypeSymlink:
		if w.Target != g.Target {
			add("symlink target", strconv.Quote(w.Target), strconv.Quote(g.Target))
		}
	case TypeCharDev, TypeBlockDev:
		if w.RdevMajor != g.RdevMajor || w.RdevMinor != g.RdevMinor {
			add("rdev", fmt.Sprintf("%d:%d", w.RdevMajor, w.RdevMinor), fmt.Sprintf("%d:%d", g.RdevMajor, g.RdevMinor))
		}
	}
	return append(out, diffXattrs(w, g, o)...)
}

// diffXattrs compares the extended attributes of two entries.
func diffXattrs(w, g *Entry, o *DiffOptions) []string {
	var out []string
	names := map[string]bool{}
	for n := range w.Xattrs {
		names[n] = true
	}
	for n := range g.Xattrs {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		if o.IgnoreXattr == nil || !o.IgnoreXattr(n) {
			sorted = append(sorted, n)
		}
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		wv, wok := w.Xattrs[n]
		gv, gok := g.Xattrs[n]
		switch {
		case !gok:
			out = append(out, fmt.Sprintf("%q: xattr %q missing (want %s)", w.Path, n, shortValue(wv)))
		case !wok:
			out = append(out, fmt.Sprintf("%q: xattr %q unexpected (got %s)", w.Path, n, shortValue(gv)))
		case wv != gv:
			out = append(out, fmt.Sprintf("%q: xattr %q: want %s, got %s", w.Path, n, shortValue(wv), shortValue(gv)))
		}
	}
	return out
}

// shortValue prints an xattr value so that long or binary values stay
// readable in a failure message.
func shortValue(v string) string {
	const max = 48
	if len(v) <= max {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(v[:max]), len(v))
}

// diffLinks compares hardlink groups, restricted to the filtered paths.
func diffLinks(want, got *Tree, o *DiffOptions) []string {
	wg, gg := linkSet(want, o), linkSet(got, o)
	var out []string
	for k := range wg {
		if !gg[k] {
			out = append(out, "hardlink group missing: "+k)
		}
	}
	for k := range gg {
		if !wg[k] {
			out = append(out, "hardlink group unexpected: "+k)
		}
	}
	sort.Strings(out)
	return out
}

// linkSet renders each filtered group with at least two paths as a string.
func linkSet(t *Tree, o *DiffOptions) map[string]bool {
	set := map[string]bool{}
	for _, g := range t.Links {
		var keep []string
		for _, p := range g {
			if o.keep(p) {
				keep = append(keep, strconv.Quote(p))
			}
		}
		if len(keep) > 1 {
			sort.Strings(keep)
			set["{"+strings.Join(keep, " ")+"}"] = true
		}
	}
	return set
}

// blockRanges widens data ranges to whole HoleGranularity blocks (capped at
// the rounded-up size) and merges ranges that then touch.
func blockRanges(rs []Range, size int64) []Range {
	limit := roundUp(size)
	var out []Range
	for _, r := range rs {
		start := r.Off / HoleGranularity * HoleGranularity
		end := min(roundUp(r.Off+r.Len), limit)
		if end <= start {
			continue
		}
		if n := len(out); n > 0 && start <= out[n-1].Off+out[n-1].Len {
			out[n-1].Len = max(out[n-1].Off+out[n-1].Len, end) - out[n-1].Off
			continue
		}
		out = append(out, Range{Off: start, Len: end - start})
	}
	return out
}

func roundUp(n int64) int64 {
	return (n + HoleGranularity - 1) / HoleGranularity * HoleGranularity
}

// fmtRanges renders ranges as "off+len,off+len" (the manifest spelling).
func fmtRanges(rs []Range) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%d+%d", r.Off, r.Len)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// fmtTime shows a nanosecond timestamp both raw and as UTC time.
func fmtTime(ns int64) string {
	return fmt.Sprintf("%d (%s)", ns, time.Unix(0, ns).UTC().Format(time.RFC3339Nano))
}

// LineDiff compares two command outputs line by line and describes the
// first difference with a few lines of context, or returns "" if they are
// equal: whole dumps are too long for a full diff in a test log.
func LineDiff(want, got string) string {
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
