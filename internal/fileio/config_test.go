package fileio

import (
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"8K": 8192, "8k": 8192, "8KB": 8192, "8KiB": 8192, "1G": 1 << 30,
		"1g": 1 << 30, "16384": 16384, "2M": 2 << 20, "1T": 1 << 40, "0": 0, " 4K ": 4096} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1.5G", "8X", "9999999999T", "1 G"} {
		if v, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, v)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{8192: "8K", 1 << 30: "1G", 1000: "1000", 3 << 20: "3M", 0: "0", 1536: "1536"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("round trip of %d: %d, %v", n, back, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	r, err := Config{Image: "x", Mode: RndRw}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.FileNum != 128 || r.FileTotalSize != 2<<30 || r.FileBlockSize != 16<<10 || r.FsyncFreq != 100 ||
		r.RWRatio != 1.5 || r.Threads != 1 || r.Time != 10*time.Second || r.noFsync || r.noTime || r.fileSize != 16<<20 {
		t.Errorf("defaults are not sysbench's: %+v", r)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Image: "x"}, "missing test mode"},
		{Config{Image: "x", Mode: "rndwrite"}, "unknown test mode"},
		{Config{Mode: RndWr}, "no image"},
		{Config{Image: "x", Mode: RndWr, Time: -1}, "no limit"},
		{Config{Image: "x", Mode: RndWr, FileNum: 4, FileTotalSize: 8192, FileBlockSize: 4096}, "smaller than a block"},
		{Config{Image: "x", Mode: RndWr, FileNum: 2, FileTotalSize: 8192, FileBlockSize: 4096, Threads: 2, Verify: true}, "more blocks"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestLatencyPercentiles(t *testing.T) {
	var l latency
	if l.percentile(0.5) != 0 {
		t.Error("percentile of nothing")
	}
	for i := 1; i <= 1000; i++ {
		l.add(time.Duration(i) * time.Millisecond)
	}
	for p, want := range map[float64]float64{0.5: 500, 0.95: 950, 0.99: 990} {
		got := l.percentile(p)
		if got < want*0.96 || got > want*1.04 {
			t.Errorf("p%.0f = %.1f ms, want about %.0f", 100*p, got, want)
		}
	}
	for _, ns := range []uint64{0, 1, 31, 32, 33, 1000, 1 << 40, 1<<64 - 1} {
		b := latencyBucket(ns)
		mid := latencyBucketMid(b)
		if float64(ns) > 0 && (mid < float64(ns)*0.96 || mid > float64(ns)*1.04+1) {
			t.Errorf("%d ns: bucket %d, middle %.0f", ns, b, mid)
		}
	}
}

// TestRequests checks the request sequence against sysbench's rules.
func TestRequests(t *testing.T) {
	t.Run("seq-fsync-rounds", func(t *testing.T) {
		r, err := Config{Image: "x", Mode: SeqRewr, FileNum: 3, FileTotalSize: 3 * 8192, FileBlockSize: 4096, FsyncFreq: 4, Events: 40}.resolve()
		if err != nil {
			t.Fatal(err)
		}
		q := newRequests(&r)
		var got []string
		for {
			req, ok := q.next()
			if !ok {
				break
			}
			if req.op == opFsync {
				got = append(got, "F"+string(rune('0'+req.file)))
			} else {
				got = append(got, string(rune('0'+req.file))+string(rune('a'+req.off/4096)))
			}
			q.done(req)
		}
		// 4 writes, then an fsync of each of the 3 files; the sequence
		// wraps after file 2's last block.
		want := "0a 0b 1a 1b F0 F1 F2 2a 2b 0a 0b F0 F1 F2 1a 1b 2a 2b F0 F1 F2 0a 0b 1a 1b F0 F1 F2 2a 2b 0a 0b F0 F1 F2 1a 1b 2a 2b F0"
		if s := strings.Join(got, " "); s != want {
			t.Errorf("sequence\n%s\nwant\n%s", s, want)
		}
	})
	t.Run("rndrw-ratio", func(t *testing.T) {
		r, err := Config{Image: "x", Mode: RndRw, FileNum: 4, FileTotalSize: 1 << 20, FileBlockSize: 4096, FsyncFreq: -1, Events: 5000, RWRatio: 1.5}.resolve()
		if err != nil {
			t.Fatal(err)
		}
		q := newRequests(&r)
		var reads, writes int
		for {
			req, ok := q.next()
			if !ok {
				break
			}
			switch req.op {
			case opRead:
				reads++
			case opWrite:
				writes++
			default:
				t.Fatal("fsync with fsync off")
			}
			if req.off%4096 != 0 || req.off >= r.fileSize || req.file >= 4 || req.size != 4096 {
				t.Fatalf("request %+v", req)
			}
			q.done(req)
		}
		if reads != 3000 || writes != 2000 {
			t.Errorf("%d reads, %d writes; want 3000 and 2000 (ratio 1.5)", reads, writes)
		}
	})
	t.Run("read-modes-never-fsync", func(t *testing.T) {
		r, _ := Config{Image: "x", Mode: RndRd, FileNum: 2, FileTotalSize: 1 << 20, FileBlockSize: 4096, FsyncFreq: 1, Events: 100}.resolve()
		q := newRequests(&r)
		for {
			req, ok := q.next()
			if !ok {
				break
			}
			if req.op != opRead {
				t.Fatalf("request %+v in rndrd", req)
			}
			q.done(req)
		}
	})
}
