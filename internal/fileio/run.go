package fileio

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobtrfs/btrfs"
)

// Result is one run: sysbench's figures, the filesystem's, and the
// B-tree engine's counters per tree. JSON names are those of
// `gobtrfs bench fileio --json`.
type Result struct {
	Shortcut      bool    `json:"shortcut"` // the push_leaf_right shortcut was on
	Mode          string  `json:"mode"`
	Threads       int     `json:"threads"`
	FileNum       int     `json:"file_num"`
	FileTotalSize int64   `json:"file_total_size"`
	FileBlockSize int     `json:"file_block_size"`
	FsyncFreq     int     `json:"file_fsync_freq"` // 0: off
	Seconds       float64 `json:"seconds"`         // the timed phase

	Events int64 `json:"events"` // reads + writes + fsyncs, as sysbench counts
	Reads  int64 `json:"reads"`
	Writes int64 `json:"writes"`
	Fsyncs int64 `json:"fsyncs"` // fsync calls, those at the end of the run included
	// FsyncsAtEnd are the fsyncs of --file-fsync-end: threads x files.
	// sysbench counts them in fsyncs/s too, where with many threads and
	// files they can outnumber the periodic ones.
	FsyncsAtEnd  int64 `json:"fsyncs_at_end"`
	BytesRead    int64 `json:"bytes_read"`
	BytesWritten int64 `json:"bytes_written"` // by the requests

	ReadMiBPerS    float64 `json:"read_mib_per_s"`
	WrittenMiBPerS float64 `json:"written_mib_per_s"`
	RequestsPerS   float64 `json:"requests_per_s"` // reads and writes
	FsyncsPerS     float64 `json:"fsyncs_per_s"`
	LatencyMS      Latency `json:"latency_ms"` // per event, as sysbench
	// LatencyByOpMS splits the events' latency by kind ("read", "write",
	// "fsync"; kinds the run did not do are left out): in sysbench's
	// figure the many fsyncs of files with nothing to commit, which
	// return at once, hide what a write costs.
	LatencyByOpMS map[string]Latency `json:"latency_by_op_ms"`

	Commits  int64 `json:"commits"`
	LogSyncs int64 `json:"log_syncs"`
	// Changes are the changes the filesystem made in the run (writes,
	// truncates); ParallelChanges those of them that ran beside changes
	// to other files.
	Changes            int64   `json:"changes"`
	ParallelChanges    int64   `json:"parallel_changes"`
	DeviceBytesWritten int64   `json:"device_bytes_written"`
	WriteAmplification float64 `json:"write_amplification"` // device bytes written / bytes written by requests
	PeakHeapBytes      uint64  `json:"peak_heap_bytes"`

	Trees map[string]btrfs.TreeCounters `json:"trees"`
	Total btrfs.TreeCounters            `json:"total"`

	// Throughput is sampled every SampleInterval of the timed phase.
	Throughput []Sample `json:"throughput"`
	// Image is the image the run changed; PreparedCRC32C the CRC-32C of
	// its bytes before the run (with Compare only, which checks that both
	// runs start from byte-identical images).
	Image          string `json:"image"`
	PreparedCRC32C string `json:"prepared_crc32c,omitempty"`
}

// Latency are percentiles of the time one event took, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// Sample is the throughput of one interval of the run.
type Sample struct {
	Seconds        float64 `json:"seconds"` // end of the interval, from the start of the run
	WrittenMiBPerS float64 `json:"written_mib_per_s"`
	ReadMiBPerS    float64 `json:"read_mib_per_s"`
}

// Run runs the workload of c on its prepared image (see Prepare) and
// reports what happened. The image keeps what the run wrote.
func Run(c Config) (Result, error) {
	r, err := c.resolve()
	if err != nil {
		return Result{}, err
	}
	fsys, err := btrfs.OpenWritable(r.Image, &btrfs.Options{NoPushRightShortcut: r.NoShortcut, NoTreeLog: r.NoTreeLog, TreeLogRebuild: r.LogRebuild})
	if err != nil {
		return Result{}, err
	}
	ru := &runner{cfg: &r, fsys: fsys, q: newRequests(&r), files: make([]fileState, r.FileNum)}
	res, err := ru.run()
	if cerr := fsys.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return res, err
}

// Compare runs c twice, with the shortcut on and off, each from an
// identical copy of the prepared image: the run with the shortcut changes
// c.Image, the one without changes a copy made first, named c.Image +
// ".noshortcut" (removed afterwards unless keepCopy). The copy is compared
// with the original byte for byte before either run; both results carry
// the checksum of the image they started from.
func Compare(c Config, keepCopy bool) ([2]Result, error) {
	var out [2]Result
	other := c.Image + ".noshortcut"
	if err := copyImage(c.Image, other); err != nil {
		return out, fmt.Errorf("copy the prepared image: %w", err)
	}
	if !keepCopy {
		defer os.Remove(other)
	}
	sum, err := sameImages(c.Image, other)
	if err != nil {
		return out, fmt.Errorf("copy of the prepared image: %w", err)
	}
	for i, off := range []bool{false, true} {
		rc := c
		rc.NoShortcut = off
		if off {
			rc.Image = other
		}
		res, err := Run(rc)
		if err != nil {
			return out, fmt.Errorf("run with the shortcut %s: %w", onOff(!off), err)
		}
		res.PreparedCRC32C = sum
		out[i] = res
	}
	return out, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// fileState is what the run knows of one file.
type fileState struct {
	f *btrfs.File // open for the whole run, as sysbench keeps its files open
	// dirty is set when a write to the file completes and cleared by the
	// fsync that then commits it: an fsync of a file with nothing new
	// commits nothing, as fsync of a clean file on Linux returns at once.
	dirty atomic.Bool
}

// runner is one run in progress.
type runner struct {
	cfg   *resolved
	fsys  *btrfs.FS
	q     *requests
	files []fileState
	lat   latency
	latOp [3]latency // by op

	reads   atomic.Int64
	writes  atomic.Int64
	fsyncs  atomic.Int64
	endSync atomic.Int64
	rbytes  atomic.Int64
	wbytes  atomic.Int64
	errOnce sync.Once
	err     error       // the first error; read after the threads ended
	failed  atomic.Bool // set with err, for the threads to see

	// versions is the Verify model: the version of every block's last
	// completed write (notWritten when a seqwr run has not reached it).
	// Writes to one block never overlap (requests.busy), and the
	// requests lock orders them, so the slice needs no lock of its own.
	versions []uint64
}

const notWritten = ^uint64(0)

func (ru *runner) blocksPerFile() int64 {
	bs := int64(ru.cfg.FileBlockSize)
	return (ru.cfg.fileSize + bs - 1) / bs
}

func (ru *runner) blockIndex(file int, off int64) int64 {
	return int64(file)*ru.blocksPerFile() + off/int64(ru.cfg.FileBlockSize)
}

func (ru *runner) fail(err error) {
	ru.errOnce.Do(func() {
		ru.err = err
		ru.failed.Store(true)
		ru.q.stop()
	})
}

func (ru *runner) run() (Result, error) {
	c := ru.cfg
	if err := ru.checkFiles(); err != nil {
		return Result{}, err
	}
	for i := range ru.files {
		f, err := ru.fsys.OpenFile(fileName(i))
		if err != nil {
			return Result{}, err
		}
		defer f.Close()
		ru.files[i].f = f
	}
	if c.Verify {
		ru.versions = make([]uint64, int64(c.FileNum)*ru.blocksPerFile())
		if c.Mode == SeqWr {
			for i := range ru.versions {
				ru.versions[i] = notWritten
			}
		}
	}
	runtime.GC() // start from the heap the run needs, not what came before
	smp := newSampler(ru, c.SampleInterval)
	start := time.Now()
	if !c.noTime {
		timer := time.AfterFunc(c.Time, ru.q.stop)
		defer timer.Stop()
	}
	smp.start(start)
	var wg sync.WaitGroup
	for range c.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ru.thread()
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	smp.stop()
	if ru.err != nil {
		return Result{}, ru.err
	}
	if c.NoFsyncEnd && c.writes() {
		// Commit what the run wrote after the timed phase, so the figures
		// below (commits, device bytes) include it, as Close would.
		if err := ru.fsys.Sync(); err != nil {
			return Result{}, err
		}
	}
	wc, err := ru.fsys.WriteCounters()
	if err != nil {
		return Result{}, err
	}
	res := ru.result(secs, wc, smp)
	if c.Verify {
		if err := ru.verifyFiles(); err != nil {
			return res, fmt.Errorf("verify: %w", err)
		}
	}
	return res, nil
}

// checkFiles refuses an image that was not prepared for c.
func (ru *runner) checkFiles() error {
	for i := range ru.cfg.FileNum {
		st, err := ru.fsys.Stat(fileName(i))
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: no %s: prepare the files first", ru.cfg.Image, fileName(i))
		}
		if err != nil {
			return err
		}
		if ru.cfg.Mode != SeqWr && st.Size() < ru.cfg.fileSize {
			return fmt.Errorf("%s: %s has %d bytes, want at least %d: prepare with the same --file-num and --file-total-size",
				ru.cfg.Image, fileName(i), st.Size(), ru.cfg.fileSize)
		}
	}
	return nil
}

// thread is one of the run's threads: requests until the run ends, then
// sysbench's --file-fsync-end: an fsync of every file.
func (ru *runner) thread() {
	buf := make([]byte, ru.cfg.FileBlockSize)
	var scratch []byte
	if ru.cfg.Verify {
		scratch = make([]byte, ru.cfg.FileBlockSize)
	}
	for {
		r, ok := ru.q.next()
		if !ok {
			break
		}
		t0 := time.Now()
		err := ru.do(r, buf[:r.size], scratch)
		d := time.Since(t0)
		ru.lat.add(d)
		ru.latOp[r.op].add(d)
		ru.q.done(r)
		if err != nil {
			ru.fail(err)
			return
		}
	}
	if ru.failed.Load() || ru.cfg.NoFsyncEnd || !ru.cfg.writes() {
		return
	}
	for i := range ru.cfg.FileNum {
		ru.endSync.Add(1)
		if err := ru.fsync(i); err != nil {
			ru.fail(err)
			return
		}
	}
}

// do carries out one request.
func (ru *runner) do(r request, p, scratch []byte) error {
	name := fileName(r.file)
	switch r.op {
	case opRead:
		n, err := ru.files[r.file].f.ReadAt(p, r.off)
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", name, r.off, err)
		}
		if ru.cfg.Verify {
			if _, err := checkBlock(p[:n], scratch[:n], r.file, r.off); err != nil {
				return err
			}
		}
		ru.reads.Add(1)
		ru.rbytes.Add(int64(n))
	case opWrite:
		if ru.cfg.Verify {
			fillBlock(p, r.file, r.off, r.version)
		}
		if _, err := ru.files[r.file].f.WriteAt(p, r.off); err != nil {
			return err
		}
		if ru.cfg.Verify {
			ru.versions[ru.blockIndex(r.file, r.off)] = r.version
		}
		ru.files[r.file].dirty.Store(true)
		ru.writes.Add(1)
		ru.wbytes.Add(int64(len(p)))
	case opFsync:
		return ru.fsync(r.file)
	}
	return nil
}

// fsync makes file i durable: Sync commits every change, so it is called
// only when the file has writes no commit took yet.
func (ru *runner) fsync(i int) error {
	ru.fsyncs.Add(1)
	if !ru.files[i].dirty.Swap(false) {
		return nil
	}
	return ru.files[i].f.Sync()
}

// result puts the run's figures together.
func (ru *runner) result(secs float64, wc btrfs.WriteCounters, smp *sampler) Result {
	c := ru.cfg
	const mib = 1 << 20
	res := Result{
		Shortcut: !c.NoShortcut, Mode: c.Mode, Threads: c.Threads, FileNum: c.FileNum,
		FileTotalSize: c.FileTotalSize, FileBlockSize: c.FileBlockSize, Seconds: secs,
		Reads: ru.reads.Load(), Writes: ru.writes.Load(), Fsyncs: ru.fsyncs.Load(), FsyncsAtEnd: ru.endSync.Load(),
		BytesRead: ru.rbytes.Load(), BytesWritten: ru.wbytes.Load(),
		LatencyMS: ru.lat.latency(), LatencyByOpMS: map[string]Latency{},
		Commits: wc.Commits, LogSyncs: wc.LogSyncs, Changes: wc.Changes, ParallelChanges: wc.ParallelChanges, DeviceBytesWritten: wc.DeviceBytesWritten, PeakHeapBytes: smp.peak,
		Trees: wc.Trees, Total: wc.Total(), Throughput: smp.samples, Image: c.Image,
	}
	if !c.noFsync {
		res.FsyncFreq = c.FsyncFreq
	}
	res.Events = int64(ru.lat.n.Load())
	for o, name := range []string{opRead: "read", opWrite: "write", opFsync: "fsync"} {
		if ru.latOp[o].n.Load() > 0 {
			res.LatencyByOpMS[name] = ru.latOp[o].latency()
		}
	}
	if secs > 0 {
		res.ReadMiBPerS = float64(res.BytesRead) / mib / secs
		res.WrittenMiBPerS = float64(res.BytesWritten) / mib / secs
		res.RequestsPerS = float64(res.Reads+res.Writes) / secs
		res.FsyncsPerS = float64(res.Fsyncs) / secs
	}
	if res.BytesWritten > 0 {
		res.WriteAmplification = float64(res.DeviceBytesWritten) / float64(res.BytesWritten)
	}
	return res
}

// verifyFiles compares every file with the model, through a fresh
// read-only open of the image: what the run left durable.
func (ru *runner) verifyFiles() error {
	c := ru.cfg
	ro, err := btrfs.Open(c.Image, nil)
	if err != nil {
		return err
	}
	defer ro.Close()
	bs := int64(c.FileBlockSize)
	buf, scratch := make([]byte, bs), make([]byte, bs)
	for i := range c.FileNum {
		want := c.fileSize
		if c.Mode == SeqWr {
			// seqwr writes each file from its start: the file ends
			// where its last written block does.
			want = 0
			for off := int64(0); off < c.fileSize; off += bs {
				if ru.versions[ru.blockIndex(i, off)] != notWritten {
					want = min(off+bs, c.fileSize)
				}
			}
		}
		data, err := ro.ReadFile(fileName(i))
		if err != nil {
			return err
		}
		if int64(len(data)) != want {
			return fmt.Errorf("%s: %d bytes, want %d", fileName(i), len(data), want)
		}
		for off := int64(0); off < want; off += bs {
			p := data[off:min(off+bs, want)]
			v := ru.versions[ru.blockIndex(i, off)]
			if v == notWritten {
				return fmt.Errorf("%s at %d: a block the run never wrote", fileName(i), off)
			}
			fillBlock(buf[:len(p)], i, off, v)
			if string(p) != string(buf[:len(p)]) {
				got, cerr := checkBlock(p, scratch[:len(p)], i, off)
				if cerr != nil {
					return cerr
				}
				return fmt.Errorf("%s at %d: version %d, want %d", fileName(i), off, got, v)
			}
		}
	}
	return nil
}

// sampler measures throughput per interval and the peak heap while the
// run goes, and reports progress.
type sampler struct {
	ru       *runner
	interval time.Duration
	done     chan struct{}
	finished chan struct{}
	samples  []Sample
	peak     uint64
	metric   []metrics.Sample
}

func newSampler(ru *runner, interval time.Duration) *sampler {
	return &sampler{ru: ru, interval: interval, done: make(chan struct{}), finished: make(chan struct{}),
		metric: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
}

// heap reads the bytes of live and not yet swept heap objects and keeps
// the largest seen.
func (s *sampler) heap() {
	metrics.Read(s.metric)
	if s.metric[0].Value.Kind() == metrics.KindUint64 {
		s.peak = max(s.peak, s.metric[0].Value.Uint64())
	}
}

func (s *sampler) start(t0 time.Time) {
	s.heap()
	go func() {
		defer close(s.finished)
		tick := time.NewTicker(s.interval)
		defer tick.Stop()
		last, lastW, lastR := t0, int64(0), int64(0)
		lastProgress := t0
		sample := func(now time.Time) {
			w, r := s.ru.wbytes.Load(), s.ru.rbytes.Load()
			dt := now.Sub(last).Seconds()
			if dt <= 0 {
				return
			}
			const mib = 1 << 20
			s.samples = append(s.samples, Sample{Seconds: now.Sub(t0).Seconds(),
				WrittenMiBPerS: float64(w-lastW) / mib / dt, ReadMiBPerS: float64(r-lastR) / mib / dt})
			last, lastW, lastR = now, w, r
		}
		for {
			select {
			case now := <-tick.C:
				s.heap()
				sample(now)
				if p := s.ru.cfg.Progress; p != nil && now.Sub(lastProgress) >= time.Second {
					lastProgress = now
					p(now.Sub(t0), int64(s.ru.lat.n.Load()))
				}
			case <-s.done:
				s.heap()
				// The last, partial interval is kept unless it is too
				// short to give a rate worth drawing (and there are
				// others).
				if now := time.Now(); len(s.samples) == 0 || now.Sub(last) >= s.interval/4 {
					sample(now)
				}
				return
			}
		}
	}()
}

func (s *sampler) stop() {
	close(s.done)
	<-s.finished
}

// TreeNames returns the tree names of r in a stable order: the trees the
// seed patch is about first (fs trees, extent, csum, free_space, root),
// then the others by name.
func TreeNames(rs ...Result) []string {
	order := map[string]int{"fs": 0, "extent": 2, "csum": 3, "free_space": 4, "root": 5, "chunk": 6, "dev": 7, "uuid": 8}
	seen := map[string]bool{}
	var names []string
	for _, r := range rs {
		for n := range r.Trees {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	rank := func(n string) int {
		if o, ok := order[n]; ok {
			return o
		}
		if len(n) > 7 && n[:7] == "subvol " {
			return 1
		}
		return 9
	}
	sort.Slice(names, func(i, j int) bool {
		if a, b := rank(names[i]), rank(names[j]); a != b {
			return a < b
		}
		return names[i] < names[j]
	})
	return names
}
