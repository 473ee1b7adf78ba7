package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/fileio"
	"github.com/gobtrfs/btrfs/mkfs"
)

// fileioFlags are the flags of `bench fileio` as typed; config turns them
// into a fileio.Config.
type fileioFlags struct {
	fileNum                      int
	totalSize, blockSize         string
	mode                         string
	fsyncFreq                    int
	fsyncEnd                     onOffValue
	rwRatio                      float64
	threads                      int
	events                       int64
	timeSecs                     int
	seed                         uint64
	noShortcut, compare, jsonOut bool
	noTreeLog, logRebuild        bool
	verify, keepCopy             bool
	plot                         string
	cpuProfile, waitProfile      string
}

// onOffValue is a sysbench boolean flag: --flag, --flag=on|off (true and
// false work too).
type onOffValue bool

func (v *onOffValue) String() string {
	if *v {
		return "on"
	}
	return "off"
}

func (v *onOffValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "on", "true", "1", "yes":
		*v = true
	case "off", "false", "0", "no":
		*v = false
	default:
		return fmt.Errorf("want on or off, not %q", s)
	}
	return nil
}

func (v *onOffValue) Type() string { return "on|off" }

func newFileioFlags() *fileioFlags {
	return &fileioFlags{fileNum: 128, totalSize: "2G", blockSize: "16K", fsyncFreq: 100, fsyncEnd: true,
		rwRatio: 1.5, threads: 1, timeSecs: 10, seed: 1}
}

// config checks the flags and makes the workload's configuration.
func (fl *fileioFlags) config(image string) (fileio.Config, error) {
	total, err := fileio.ParseSize(fl.totalSize)
	if err != nil {
		return fileio.Config{}, fmt.Errorf("--file-total-size: %w", err)
	}
	block, err := fileio.ParseSize(fl.blockSize)
	if err != nil {
		return fileio.Config{}, fmt.Errorf("--file-block-size: %w", err)
	}
	if total <= 0 || block <= 0 || block > 1<<30 {
		return fileio.Config{}, fmt.Errorf("--file-total-size and --file-block-size must be positive (blocks up to 1G)")
	}
	if fl.fileNum <= 0 || fl.threads <= 0 || fl.fsyncFreq < 0 || fl.timeSecs < 0 || fl.events < 0 {
		return fileio.Config{}, fmt.Errorf("--file-num and --threads must be positive; --file-fsync-freq, --time and --events must not be negative")
	}
	c := fileio.Config{Image: image, Mode: fl.mode, FileNum: fl.fileNum, FileTotalSize: total,
		FileBlockSize: int(block), FsyncFreq: fl.fsyncFreq, NoFsyncEnd: !bool(fl.fsyncEnd), RWRatio: fl.rwRatio,
		Threads: fl.threads, Events: fl.events, Time: time.Duration(fl.timeSecs) * time.Second,
		NoShortcut: fl.noShortcut, NoTreeLog: fl.noTreeLog, LogRebuild: fl.logRebuild, Seed: fl.seed, Verify: fl.verify}
	// sysbench's 0 means off (fsync) or no limit (time); the Config's
	// zero value means sysbench's default instead.
	if fl.fsyncFreq == 0 {
		c.FsyncFreq = -1
	}
	if fl.timeSecs == 0 {
		c.Time = -1
	}
	if fl.rwRatio == 0 {
		return c, fmt.Errorf("--file-rw-ratio must be above 0")
	}
	if fl.compare && fl.noShortcut {
		return c, fmt.Errorf("--compare runs both ways; leave out --no-push-right-shortcut")
	}
	return c, c.Validate()
}

const fileioDifferences = `Differences from sysbench fileio 1.0.20:
  - The files live in IMAGE (a btrfs image or device) and are reached through
    gobtrfs's own filesystem, in this process; the kernel is not involved.
  - fsync is File.Sync: while the transaction holds only data writes to files
    that existed at the last commit it writes the tree log, as the kernel does;
    otherwise it commits the whole filesystem (the kernel logs names and new
    files too). An fsync of a file with no write since the last commit
    returns at once, as fsync of a clean file does on Linux. "commits" counts
    real commits, not log writes.
  - seqwr: prepare removes the files and creates them empty (sysbench's run
    does that part), so the timed phase starts from empty files here too.
  - Reads never wait for one another; writes to different files run in
    parallel; concurrent fsyncs share one commit or log write (group commit).
  - --file-fsync-end=off: what was written is committed after the timed phase.
  - Written data is zeros (as sysbench without --validate); --verify writes
    checkable blocks and checks every read and every file at the end.
  - Only synchronous I/O: no --file-io-mode, --file-extra-flags,
    --file-fsync-all, --file-fsync-mode or --file-merged-requests.`

func newBenchFileioCommand() *cobra.Command {
	fl := newFileioFlags()
	cmd := &cobra.Command{
		Use:   "fileio IMAGE --file-test-mode MODE [flags]",
		Short: "sysbench fileio through gobtrfs's filesystem, with the B-tree counters per tree",
		Long: `fileio runs sysbench's fileio benchmark inside this process, on the btrfs
filesystem in IMAGE, through gobtrfs's write API, and reports sysbench's
figures together with the copy-on-write B-tree's counters per tree: how
often split_leaf called push_leaf_right and how often the seed patch's
shortcut ("Btrfs: more efficient push_leaf_right") was taken, and why not.

When IMAGE does not exist it is made with gobtrfs mkfs (sparse, three
times the files' size plus 1 GiB: random overwrites keep the rest of each
prepared extent until all of it is overwritten, as on the kernel). The prepare phase then creates test_file.0 ..
test_file.N-1 as sysbench's prepare does (files already full size are
reused) and the timed run follows.

Modes (--file-test-mode): seqwr, seqrewr, seqrd, rndrd, rndwr, rndrw.
Sizes take K, M, G, T suffixes (powers of 1024).

Trees are named fs (the top-level subvolume), subvol ID (other subvolumes),
extent, csum, free_space, root, chunk, dev, uuid, and so on; a tree the run
did not change is not listed. For each, push_leaf_right calls end one way:
shortcut taken, the new key not past the leaf's end (not at_end), at_end but
the leaf is its parent's last child (no sibling), at_end but the right
neighbour lacks room (no room), or at_end with room while the shortcut is off.

--compare runs the workload twice, with and without the shortcut, each from
an identical copy of the prepared image (IMAGE itself for the run with it;
IMAGE.noshortcut, removed afterwards unless --keep-copy, for the other).
--json prints one object per run (an array of two with --compare, each with
a boolean "shortcut"). --plot FILE.svg draws, per tree, the push_leaf_right
calls and the share that took the shortcut, and the throughput over the run.

` + fileioDifferences,
		Example: `  gobtrfs bench fileio /tmp/fio.img --file-num 512 --file-total-size 1G --file-block-size 8K \
      --file-test-mode rndwr --file-fsync-freq 100 --threads 512 --compare --plot fio.svg
  gobtrfs bench fileio /tmp/fio.img --file-test-mode seqwr --threads 64 --time 30 --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("want one IMAGE, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := fl.config(args[0])
			if err != nil {
				return usagef("%v", err)
			}
			return runBenchFileio(cmd, fl, cfg)
		},
	}
	fl.bind(cmd.Flags())
	return cmd
}

// bind defines the command's flags on f, with sysbench's names.
func (fl *fileioFlags) bind(f *pflag.FlagSet) {
	f.IntVar(&fl.fileNum, "file-num", fl.fileNum, "number of files")
	f.StringVar(&fl.totalSize, "file-total-size", fl.totalSize, "total size of the files")
	f.StringVar(&fl.blockSize, "file-block-size", fl.blockSize, "size of every read and write")
	f.StringVar(&fl.mode, "file-test-mode", "", "test mode: "+strings.Join(fileio.Modes, ", "))
	f.IntVar(&fl.fsyncFreq, "file-fsync-freq", fl.fsyncFreq, "fsync the files after this many requests (0: never)")
	f.Var(&fl.fsyncEnd, "file-fsync-end", "fsync every file at the end of the run (on|off)")
	f.Lookup("file-fsync-end").NoOptDefVal = "on"
	f.Float64Var(&fl.rwRatio, "file-rw-ratio", fl.rwRatio, "rndrw: reads per write")
	f.IntVar(&fl.threads, "threads", fl.threads, "number of threads (goroutines)")
	f.Int64Var(&fl.events, "events", 0, "stop after this many events (0: no limit)")
	f.IntVar(&fl.timeSecs, "time", fl.timeSecs, "stop after this many seconds (0: no limit)")
	f.Uint64Var(&fl.seed, "seed", fl.seed, "seed of the random positions")
	f.BoolVar(&fl.noShortcut, "no-push-right-shortcut", false, "turn off the seed patch's shortcut in push_leaf_right")
	f.BoolVar(&fl.noTreeLog, "notreelog", false, "make every fsync a commit, as the kernel's notreelog mount option (the tree log is used by default)")
	f.BoolVar(&fl.logRebuild, "log-rebuild", false, "log every item of an fsynced file at each fsync, as the kernel of the seed patch's time did (measurement only)")
	f.BoolVar(&fl.compare, "compare", false, "run with and without the shortcut, each from a copy of the prepared image")
	f.BoolVar(&fl.keepCopy, "keep-copy", false, "--compare: keep IMAGE.noshortcut")
	f.BoolVar(&fl.verify, "verify", false, "write checkable data and verify every read and every file at the end (slow; the image must be prepared with --verify)")
	f.BoolVar(&fl.jsonOut, "json", false, "print JSON")
	f.StringVar(&fl.plot, "plot", "", "write an SVG chart to this file")
	f.StringVar(&fl.cpuProfile, "cpuprofile", "", "write a CPU profile of the run phase (not the prepare phase) to this file, for go tool pprof")
	f.StringVar(&fl.waitProfile, "waitprofile", "", "write where goroutines waited on locks and channels (Go's block profile) to this file, for go tool pprof")
}

// startWaitProfile records every wait on a lock or channel until the
// returned function writes them to path as a block profile.
func startWaitProfile(path string) (stop func() error) {
	runtime.SetBlockProfileRate(1)
	return func() error {
		defer runtime.SetBlockProfileRate(0)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("block").WriteTo(f, 0); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
}

// startCPUProfile profiles the process's CPU into path until the returned
// function is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// runBenchFileio makes the image if needed, prepares the files, runs and
// reports.
func runBenchFileio(cmd *cobra.Command, fl *fileioFlags, cfg fileio.Config) error {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if _, err := os.Stat(cfg.Image); errors.Is(err, os.ErrNotExist) {
		size, err := fileio.ImageSize(cfg)
		if err != nil {
			return err
		}
		if err := mkfs.Format(cfg.Image, mkfs.Options{Size: size}); err != nil {
			return err
		}
		fmt.Fprintf(errw, "made %s: %s, sparse\n", cfg.Image, fileio.FormatSize(size))
	} else if err != nil {
		return err
	}
	pr, err := fileio.Prepare(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(errw, "prepare: %d files made or extended, %d reused, %s written in %.2f s\n",
		pr.Files, pr.Reused, fileio.FormatSize(pr.BytesWritten), pr.Seconds)
	if f, ok := errw.(*os.File); ok && isTerminal(f) {
		cfg.Progress = func(el time.Duration, events int64) {
			fmt.Fprintf(errw, "\r%s: %ds, %d events ", cfg.Mode, int(el.Seconds()), events)
		}
	}
	if fl.cpuProfile != "" {
		stop, err := startCPUProfile(fl.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if fl.waitProfile != "" {
		stop := startWaitProfile(fl.waitProfile)
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(errw, "gobtrfs bench fileio: --waitprofile: %v\n", err)
			}
		}()
	}
	var runs []fileio.Result
	if fl.compare {
		two, err := fileio.Compare(cfg, fl.keepCopy)
		if err != nil {
			return err
		}
		runs = two[:]
	} else {
		r, err := fileio.Run(cfg)
		if err != nil {
			return err
		}
		runs = []fileio.Result{r}
	}
	if cfg.Progress != nil {
		fmt.Fprint(errw, "\r\033[K")
	}
	if fl.plot != "" {
		if err := writePlotFile(fl.plot, runs); err != nil {
			return err
		}
	}
	if fl.jsonOut {
		if fl.compare {
			return writeBenchJSON(out, runs)
		}
		return writeBenchJSON(out, runs[0])
	}
	return writeFileioReport(out, runs)
}

func writePlotFile(path string, runs []fileio.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fileio.WritePlot(f, runs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFileioReport prints the runs for a person: sysbench's figures side
// by side, then the B-tree counters per tree.
func writeFileioReport(w io.Writer, runs []fileio.Result) error {
	r0 := runs[0]
	fsync := "no periodic fsync"
	if r0.FsyncFreq > 0 {
		fsync = fmt.Sprintf("fsync every %d requests", r0.FsyncFreq)
	}
	fmt.Fprintf(w, "fileio %s: %d files, %s each (%s), %s requests, %d threads, %s\n\n",
		r0.Mode, r0.FileNum, fileio.FormatSize(r0.FileTotalSize/int64(r0.FileNum)), fileio.FormatSize(r0.FileTotalSize),
		fileio.FormatSize(int64(r0.FileBlockSize)), r0.Threads, fsync)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "\t"
	for _, r := range runs {
		head += "shortcut " + onOffWord(r.Shortcut) + "\t"
	}
	fmt.Fprintln(tw, head)
	line := func(name string, f func(r fileio.Result) string) {
		s := name + "\t"
		for _, r := range runs {
			s += f(r) + "\t"
		}
		fmt.Fprintln(tw, s)
	}
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	line("seconds", func(r fileio.Result) string { return f2(r.Seconds) })
	line("events", func(r fileio.Result) string { return strconv.FormatInt(r.Events, 10) })
	line("reads/s", func(r fileio.Result) string { return f2(float64(r.Reads) / r.Seconds) })
	line("writes/s", func(r fileio.Result) string { return f2(float64(r.Writes) / r.Seconds) })
	line("fsyncs/s", func(r fileio.Result) string { return f2(r.FsyncsPerS) })
	line("fsyncs at the end", func(r fileio.Result) string { return strconv.FormatInt(r.FsyncsAtEnd, 10) })
	line("requests/s", func(r fileio.Result) string { return f2(r.RequestsPerS) })
	line("read MiB/s", func(r fileio.Result) string { return f2(r.ReadMiBPerS) })
	line("written MiB/s", func(r fileio.Result) string { return f2(r.WrittenMiBPerS) })
	pcts := func(l fileio.Latency) string { return f2(l.P50) + " / " + f2(l.P95) + " / " + f2(l.P99) }
	line("latency ms p50 / p95 / p99", func(r fileio.Result) string { return pcts(r.LatencyMS) })
	for _, op := range []string{"read", "write", "fsync"} {
		if _, ok := runs[0].LatencyByOpMS[op]; ok {
			line(op+" latency ms", func(r fileio.Result) string { return pcts(r.LatencyByOpMS[op]) })
		}
	}
	line("commits", func(r fileio.Result) string { return strconv.FormatInt(r.Commits, 10) })
	line("log syncs", func(r fileio.Result) string { return strconv.FormatInt(r.LogSyncs, 10) })
	line("changes / in parallel", func(r fileio.Result) string {
		return strconv.FormatInt(r.Changes, 10) + " / " + strconv.FormatInt(r.ParallelChanges, 10)
	})
	line("device MiB written", func(r fileio.Result) string { return f2(float64(r.DeviceBytesWritten) / (1 << 20)) })
	line("write amplification", func(r fileio.Result) string { return f2(r.WriteAmplification) })
	line("peak heap MiB", func(r fileio.Result) string { return f2(float64(r.PeakHeapBytes) / (1 << 20)) })
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nB-tree counters per tree (at_end: the new key went past the leaf's last item)\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tree\tshortcut\tsplit_leaf\tpush_leaf_right\ttook shortcut\tshare\tnot at_end\tat_end no sibling\tat_end no room\tat_end shortcut off\tpush_leaf_left\titems_moved\tbytes_moved\tleaf_splits\tnode_splits\tblocks_cowed\tblocks_written\t")
	row := func(name string, r fileio.Result, c btrfs.TreeCounters) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f%%\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, onOffWord(r.Shortcut),
			c.SplitLeaf, c.PushLeafRight, c.PushLeafRightShortcut, 100*c.ShortcutShare(), c.PushLeafRightNotAtEnd,
			c.PushLeafRightAtEndNoSibling, c.PushLeafRightAtEndNoRoom, c.PushLeafRightAtEndShortcutOff, c.PushLeafLeft,
			c.ItemsMoved, c.BytesMoved, c.LeafSplits, c.NodeSplits, c.BlocksCowed, c.BlocksWritten)
	}
	for _, name := range fileio.TreeNames(runs...) {
		for _, r := range runs {
			row(name, r, r.Trees[name])
		}
	}
	for _, r := range runs {
		row("total", r, r.Total)
	}
	return tw.Flush()
}

func onOffWord(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
