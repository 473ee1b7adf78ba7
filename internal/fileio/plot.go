package fileio

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// WritePlot draws runs (one, or the two of a comparison) as an SVG
// picture: per tree, a bar of push_leaf_right calls for each run with the
// part that took the shortcut filled in, labelled with the count and the
// share; below, the throughput of each run over time. SVG is written by
// hand: it is a few rectangles, lines and texts.
func WritePlot(w io.Writer, runs []Result) error {
	if len(runs) == 0 {
		return fmt.Errorf("plot: no runs")
	}
	p := &plot{w: bufio.NewWriter(w)}
	p.draw(runs)
	return p.w.Flush()
}

type plot struct {
	w *bufio.Writer
}

// Sizes and colours of the picture.
const (
	plotWidth   = 960
	plotMargin  = 20
	plotLabelW  = 150 // tree and run names left of the bars
	plotBarH    = 18
	plotBarGap  = 4
	plotTreeGap = 12
	plotLineH   = 240 // height of the throughput chart's plot area
	colShortcut = "#2b6cb0"
	colOther    = "#cbd5e0"
	colOn       = "#2b6cb0"
	colOff      = "#dd6b20"
	colAxis     = "#4a5568"
	colGrid     = "#e2e8f0"
)

func (p *plot) printf(format string, args ...any) { fmt.Fprintf(p.w, format, args...) }

func (p *plot) text(x, y float64, anchor, style, s string) {
	p.printf(`<text x="%.1f" y="%.1f" text-anchor="%s" %s>%s</text>`+"\n", x, y, anchor, style, html.EscapeString(s))
}

func runColour(r Result) string {
	if r.Shortcut {
		return colOn
	}
	return colOff
}

func runName(r Result) string { return "shortcut " + onOff(r.Shortcut) }

func (p *plot) draw(runs []Result) {
	var trees, quiet []string
	for _, n := range TreeNames(runs...) {
		calls := int64(0)
		for _, r := range runs {
			calls += r.Trees[n].PushLeafRight
		}
		if calls > 0 {
			trees = append(trees, n)
		} else {
			quiet = append(quiet, n)
		}
	}
	// Bar section: one row per tree and run, plus the total.
	rows := len(trees) + 1
	barsH := float64(rows)*(float64(len(runs))*(plotBarH+plotBarGap)+plotTreeGap) + 60
	lineTop := 90 + barsH + 40
	height := lineTop + plotLineH + 80
	p.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		plotWidth, height, plotWidth, height)
	p.printf(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	r0 := runs[0]
	p.text(plotMargin, 28, "start", `font-size="16" font-weight="bold"`,
		fmt.Sprintf("gobtrfs bench fileio %s: %d files, %s total, %s requests, %d threads", r0.Mode, r0.FileNum,
			FormatSize(r0.FileTotalSize), FormatSize(int64(r0.FileBlockSize)), r0.Threads))
	p.text(plotMargin, 50, "start", `fill="`+colAxis+`"`,
		"push_leaf_right calls from split_leaf per tree; the filled part took the shortcut (\"more efficient push_leaf_right\")")
	p.bars(runs, trees, 70)
	y := 70 + barsH - 30
	if len(quiet) > 0 {
		p.text(plotMargin, y, "start", `fill="`+colAxis+`"`, "no push_leaf_right in: "+strings.Join(quiet, ", "))
	}
	p.throughput(runs, lineTop)
	p.printf("</svg>\n")
}

// bars draws the per-tree bars from top.
func (p *plot) bars(runs []Result, trees []string, top float64) {
	var maxCalls int64 = 1
	for _, r := range runs {
		maxCalls = max(maxCalls, r.Total.PushLeafRight)
	}
	x0 := float64(plotMargin + plotLabelW)
	span := float64(plotWidth-plotMargin) - x0 - 250 // room for the label after the bar
	y := top
	row := func(label string, get func(Result) (calls, short int64)) {
		p.text(plotMargin, y+plotBarH-4, "start", `font-weight="bold"`, label)
		for _, r := range runs {
			calls, short := get(r)
			wAll := span * float64(calls) / float64(maxCalls)
			wShort := span * float64(short) / float64(maxCalls)
			p.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y, max(wAll, 0.5), plotBarH, colOther)
			p.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y, wShort, plotBarH, colShortcut)
			p.printf(`<rect x="%.1f" y="%.1f" width="4" height="%d" fill="%s"/>`+"\n", x0-6, y, plotBarH, runColour(r))
			share := 0.0
			if calls > 0 {
				share = 100 * float64(short) / float64(calls)
			}
			p.text(x0-10, y+plotBarH-5, "end", `fill="`+colAxis+`"`, runName(r))
			p.text(x0+wAll+6, y+plotBarH-5, "start", "",
				fmt.Sprintf("%d calls, %d shortcut (%.1f%%)", calls, short, share))
			y += plotBarH + plotBarGap
		}
		y += plotTreeGap
	}
	for _, n := range trees {
		row(n, func(r Result) (int64, int64) { c := r.Trees[n]; return c.PushLeafRight, c.PushLeafRightShortcut })
	}
	row("all trees", func(r Result) (int64, int64) { return r.Total.PushLeafRight, r.Total.PushLeafRightShortcut })
}

// throughput draws MiB/s over time for every run, written solid and read
// dashed, from top.
func (p *plot) throughput(runs []Result, top float64) {
	left, right := float64(plotMargin+60), float64(plotWidth-plotMargin-10)
	bottom := top + plotLineH
	p.text(plotMargin, top-14, "start", `font-size="14" font-weight="bold"`, "Throughput over the run (MiB/s)")
	maxT, maxV := 0.0, 0.0
	for _, r := range runs {
		for _, s := range r.Throughput {
			maxT = max(maxT, s.Seconds)
			maxV = max(maxV, s.WrittenMiBPerS, s.ReadMiBPerS)
		}
	}
	if maxT == 0 {
		maxT = 1
	}
	maxV = niceCeil(maxV)
	sx := func(t float64) float64 { return left + (right-left)*t/maxT }
	sy := func(v float64) float64 { return bottom - (bottom-top)*v/maxV }
	for i := 0; i <= 4; i++ {
		v := maxV * float64(i) / 4
		p.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, sy(v), right, sy(v), colGrid)
		p.text(left-6, sy(v)+4, "end", `fill="`+colAxis+`"`, trimFloat(v))
	}
	step := niceCeil(maxT / 8)
	for t := 0.0; t <= maxT+1e-9; t += step {
		p.text(sx(t), bottom+16, "middle", `fill="`+colAxis+`"`, trimFloat(t))
	}
	p.text((left+right)/2, bottom+34, "middle", `fill="`+colAxis+`"`, "seconds")
	p.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, bottom, right, bottom, colAxis)
	p.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", left, top, left, bottom, colAxis)
	legendX := left + 10
	for _, r := range runs {
		for _, kind := range []struct {
			name string
			get  func(Sample) float64
			dash string
			want bool
		}{
			{"written", func(s Sample) float64 { return s.WrittenMiBPerS }, "", r.BytesWritten > 0},
			{"read", func(s Sample) float64 { return s.ReadMiBPerS }, ` stroke-dasharray="6 4"`, r.BytesRead > 0},
		} {
			if !kind.want || len(r.Throughput) == 0 {
				continue
			}
			var pts []string
			for _, s := range r.Throughput {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(s.Seconds), sy(kind.get(s))))
			}
			p.printf(`<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n",
				runColour(r), kind.dash, strings.Join(pts, " "))
			label := fmt.Sprintf("%s, %s (mean %.1f MiB/s)", runName(r), kind.name, meanOf(r, kind.name))
			p.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n",
				legendX, bottom+52, legendX+24, bottom+52, runColour(r), kind.dash)
			p.text(legendX+30, bottom+56, "start", "", label)
			legendX += 30 + 7*float64(len(label)) + 20
		}
	}
}

func meanOf(r Result, kind string) float64 {
	if kind == "read" {
		return r.ReadMiBPerS
	}
	return r.WrittenMiBPerS
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
