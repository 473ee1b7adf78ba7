package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress draws a one-line progress display on a terminal. It is silent
// when w is not a terminal or quiet is set, so scripts and logs never see it.
type progress struct {
	w     io.Writer
	on    bool
	total int64
	label string

	mu    sync.Mutex
	done  int64
	items int64
	last  time.Time
	start time.Time
}

func newProgress(w io.Writer, quiet bool, label string, total int64) *progress {
	p := &progress{w: w, label: label, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok && !quiet {
		p.on = isTerminal(f)
	}
	return p
}

// add records n more bytes and one more item, redrawing at most 10 times a
// second.
func (p *progress) add(n int64) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	p.items++
	if time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.draw()
}

func (p *progress) draw() {
	secs := time.Since(p.start).Seconds()
	rate := float64(p.done) / (1 << 20) / max(secs, 1e-3)
	if p.total > 0 {
		pct := float64(p.done) * 100 / float64(p.total)
		const width = 30
		fill := min(width, int(pct*width/100))
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < fill {
				bar[i] = '='
			}
		}
		fmt.Fprintf(p.w, "\r%s [%s] %5.1f%% %d files %.1f MiB/s ", p.label, bar, min(pct, 100), p.items, rate)
		return
	}
	fmt.Fprintf(p.w, "\r%s %d files %.1f MiB %.1f MiB/s ", p.label, p.items, float64(p.done)/(1<<20), rate)
}

// finish clears the line.
func (p *progress) finish() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
