package fileio

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Test modes, with sysbench's names.
const (
	SeqWr   = "seqwr"   // sequential write: files recreated empty, then written from the start
	SeqRewr = "seqrewr" // sequential rewrite of the prepared files
	SeqRd   = "seqrd"   // sequential read
	RndRd   = "rndrd"   // random reads
	RndWr   = "rndwr"   // random writes
	RndRw   = "rndrw"   // random reads and writes, --file-rw-ratio reads per write
)

// Modes lists the test modes in sysbench's order.
var Modes = []string{SeqWr, SeqRewr, SeqRd, RndRd, RndWr, RndRw}

// Config is one fileio workload. The zero value of every field but Image
// and Mode is sysbench's default; the command's flags carry sysbench's
// names (--file-num and so on).
type Config struct {
	// Image is the btrfs image the files live in. It must exist; the
	// command makes one with mkfs (ImageSize) when it does not.
	Image string
	// Mode is one of Modes (sysbench requires it too).
	Mode string

	FileNum       int   // files test_file.0 .. test_file.N-1; 0 means 128
	FileTotalSize int64 // bytes over all files; 0 means 2 GiB
	FileBlockSize int   // bytes per request; 0 means 16 KiB
	// FsyncFreq: after every FsyncFreq read or write requests (counted
	// over all threads, as sysbench does) with a write among them, the
	// next FileNum requests fsync the files one by one. 0 means 100;
	// negative turns periodic fsync off (sysbench's 0).
	FsyncFreq int
	// NoFsyncEnd turns off sysbench's --file-fsync-end: every thread
	// fsyncs every file when it stops.
	NoFsyncEnd bool
	// RWRatio is rndrw's reads per write; 0 means 1.5.
	RWRatio float64
	// Threads run requests concurrently; 0 means 1.
	Threads int
	// Events stops the run after this many requests (reads, writes and
	// fsyncs, as sysbench counts events); 0 is no limit.
	Events int64
	// Time stops the run after this long; 0 means 10 s, negative is no
	// limit (sysbench's --time 0). A run needs Events or Time.
	Time time.Duration

	// NoShortcut turns off the push_leaf_right shortcut in every tree
	// (btrfs.Options.NoPushRightShortcut).
	NoShortcut bool
	// NoTreeLog makes every fsync a commit (btrfs.Options.NoTreeLog,
	// the kernel's notreelog): for measuring what the tree log changes.
	NoTreeLog bool
	// LogRebuild logs every item of an fsynced file at each fsync
	// (btrfs.Options.TreeLogRebuild): for measuring the shortcut share of
	// a log tree rebuilt per fsync, as the kernel of the seed's time.
	LogRebuild bool
	// Seed feeds the random request positions; 0 means 1. Threads still
	// interleave as the scheduler lets them, so runs are not repeatable
	// request for request.
	Seed uint64
	// Verify writes self-describing data (file, offset and a version in
	// every block), keeps a model of what each block must hold, checks
	// every block read, and compares every file with the model after the
	// run. Like sysbench's --validate, random requests then avoid blocks
	// another thread is working on. It costs CPU: for tests, not
	// measurements.
	Verify bool
	// SampleInterval is the period of the throughput and heap samples;
	// 0 means a 25th of Time, from 100 ms to 5 s (100 ms without a time
	// limit): enough points for a curve, few enough to show a trend
	// rather than each commit.
	SampleInterval time.Duration
	// Progress, when set, is called about once a second during the run
	// with the time elapsed and the events done so far.
	Progress func(elapsed time.Duration, events int64)
}

// resolved is a Config with every default filled in and derived sizes.
type resolved struct {
	Config
	fileSize int64
	noTime   bool
	noFsync  bool
}

func (c Config) resolve() (resolved, error) {
	if c.FileNum == 0 {
		c.FileNum = 128
	}
	if c.FileTotalSize == 0 {
		c.FileTotalSize = 2 << 30
	}
	if c.FileBlockSize == 0 {
		c.FileBlockSize = 16 << 10
	}
	if c.FsyncFreq == 0 {
		c.FsyncFreq = 100
	}
	if c.RWRatio == 0 {
		c.RWRatio = 1.5
	}
	if c.Threads == 0 {
		c.Threads = 1
	}
	if c.Time == 0 {
		c.Time = 10 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.SampleInterval <= 0 {
		c.SampleInterval = 100 * time.Millisecond
		if c.Time > 0 {
			c.SampleInterval = min(max(c.Time/25, 100*time.Millisecond), 5*time.Second)
		}
	}
	r := resolved{Config: c, noTime: c.Time < 0, noFsync: c.FsyncFreq < 0}
	switch {
	case c.Image == "":
		return r, fmt.Errorf("no image given")
	case c.Mode == "":
		return r, fmt.Errorf("missing test mode (one of %s)", strings.Join(Modes, ", "))
	case !slices.Contains(Modes, c.Mode):
		return r, fmt.Errorf("unknown test mode %q (one of %s)", c.Mode, strings.Join(Modes, ", "))
	case c.FileNum < 0:
		return r, fmt.Errorf("file-num %d: must be positive", c.FileNum)
	case c.FileTotalSize < 0:
		return r, fmt.Errorf("file-total-size %d: must be positive", c.FileTotalSize)
	case c.FileBlockSize < 0:
		return r, fmt.Errorf("file-block-size %d: must be positive", c.FileBlockSize)
	case c.RWRatio < 0:
		return r, fmt.Errorf("file-rw-ratio %g: must not be negative", c.RWRatio)
	case c.Threads < 0:
		return r, fmt.Errorf("threads %d: must be positive", c.Threads)
	case c.Events < 0:
		return r, fmt.Errorf("events %d: must not be negative", c.Events)
	case r.noTime && c.Events == 0:
		return r, fmt.Errorf("no limit: give --events or --time (the run would never end)")
	}
	r.fileSize = c.FileTotalSize / int64(c.FileNum)
	if r.fileSize < int64(c.FileBlockSize) {
		return r, fmt.Errorf("files of %d bytes (file-total-size / file-num) are smaller than a block of %d",
			r.fileSize, c.FileBlockSize)
	}
	if blocks := (r.fileSize + int64(c.FileBlockSize) - 1) / int64(c.FileBlockSize) * int64(c.FileNum); c.Verify && blocks <= int64(c.Threads) {
		return r, fmt.Errorf("verify needs more blocks (%d) than threads (%d): every thread holds one", blocks, c.Threads)
	}
	return r, nil
}

// Validate reports what is wrong with c, if anything.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// writes reports whether the mode writes.
func (r *resolved) writes() bool {
	return r.Mode == SeqWr || r.Mode == SeqRewr || r.Mode == RndWr || r.Mode == RndRw
}

// reads reports whether the mode reads.
func (r *resolved) reads() bool { return r.Mode == SeqRd || r.Mode == RndRd || r.Mode == RndRw }

// fileName is sysbench's name of file i.
func fileName(i int) string { return fmt.Sprintf("test_file.%d", i) }
