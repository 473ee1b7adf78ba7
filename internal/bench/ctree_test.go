package bench

import (
	"testing"
)

func small(w string) Config {
	c := DefaultConfig()
	c.Workload = w
	c.Ops = 4000
	c.Streams = 32
	c.CommitEvery = 700
	c.Verify = true
	return c
}

// TestRunWorkloads runs every workload with verification and checks the
// figures that do not depend on timing.
func TestRunWorkloads(t *testing.T) {
	for _, w := range Workloads {
		t.Run(w, func(t *testing.T) {
			c := small(w)
			on, off, err := Compare(c)
			if err != nil {
				t.Fatal(err)
			}
			if on.PushLeafRightAtEnd != on.PushLeafRightShortcut+on.PushLeafRightAtEndNoSibling+on.PushLeafRightAtEndNoRoom {
				t.Errorf("at_end %d != shortcut %d + no_sibling %d + no_room %d", on.PushLeafRightAtEnd,
					on.PushLeafRightShortcut, on.PushLeafRightAtEndNoSibling, on.PushLeafRightAtEndNoRoom)
			}
			if !on.Shortcut || off.Shortcut || off.PushLeafRightShortcut != 0 {
				t.Errorf("shortcut flags: on %v off %v (off took %d)", on.Shortcut, off.Shortcut, off.PushLeafRightShortcut)
			}
			for _, r := range []Result{on, off} {
				wantItems := c.Ops
				if w == Delete {
					wantItems = 0
				}
				if r.Items != wantItems || r.Ops != c.Ops || r.BlocksWritten == 0 || r.Height < 1 {
					t.Errorf("result %+v", r)
				}
				if w != Delete && (r.SplitLeaf == 0 || r.Leaves < 2) {
					t.Errorf("no splits: %+v", r)
				}
			}
		})
	}
}

// TestRunDeterministic checks that a seed fixes every counter.
func TestRunDeterministic(t *testing.T) {
	c := small(Interleaved)
	a, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	a.Seconds, a.OpsPerSec, b.Seconds, b.OpsPerSec = 0, 0, 0, 0
	if a != b {
		t.Errorf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// TestShortcutTakenSomewhere makes sure the benchmark exercises the
// shortcut: random keys with large items often land past a full leaf's end.
func TestShortcutTakenSomewhere(t *testing.T) {
	c := small(Random)
	c.ItemSize = 2000
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.PushLeafRightShortcut == 0 || r.ShortcutShare <= 0 {
		t.Errorf("shortcut never taken: %+v", r)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{Workload: "x", Ops: 1, Streams: 1, NodeSize: 4096, CommitEvery: 1},
		{Workload: Append, Ops: 0, Streams: 1, NodeSize: 4096, CommitEvery: 1},
		{Workload: Append, Ops: 1, Streams: 0, NodeSize: 4096, CommitEvery: 1},
		{Workload: Append, Ops: 1, Streams: 1, NodeSize: 3000, CommitEvery: 1},
		{Workload: Append, Ops: 1, Streams: 1, NodeSize: 4096, ItemSize: 4000, CommitEvery: 1},
		{Workload: Append, Ops: 1, Streams: 1, NodeSize: 4096, CommitEvery: 0},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v: valid", c)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}

// benchmark runs workload w b.N operations at a time, with the shortcut
// on and off, reporting the shortcut share and items moved per op.
func benchmark(b *testing.B, w string, itemSize int) {
	for _, noShortcut := range []bool{false, true} {
		name := "shortcut"
		if noShortcut {
			name = "noshortcut"
		}
		b.Run(name, func(b *testing.B) {
			c := DefaultConfig()
			c.Workload = w
			c.Ops = max(b.N, 1)
			c.ItemSize = itemSize
			c.NoShortcut = noShortcut
			b.ResetTimer()
			r, err := Run(c)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(100*r.ShortcutShare, "%shortcut")
			b.ReportMetric(float64(r.ItemsMoved)/float64(c.Ops), "moved/op")
			b.ReportMetric(float64(r.BlocksWritten)/float64(c.Ops), "written/op")
		})
	}
}

func BenchmarkCtreeAppend(b *testing.B)      { benchmark(b, Append, FileExtentItemSize) }
func BenchmarkCtreeInterleaved(b *testing.B) { benchmark(b, Interleaved, FileExtentItemSize) }
func BenchmarkCtreeRandom(b *testing.B)      { benchmark(b, Random, FileExtentItemSize) }
func BenchmarkCtreeRandomLarge(b *testing.B) { benchmark(b, Random, 2000) }
func BenchmarkCtreeDelete(b *testing.B)      { benchmark(b, Delete, FileExtentItemSize) }
