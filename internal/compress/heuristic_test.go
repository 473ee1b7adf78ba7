package compress

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// refJudge is a deliberately plain second implementation of the heuristic,
// step by step as the kernel describes it (copy the sample out, compare its
// halves, sort all 256 counts, sum 64 then one at a time), to check the
// optimized one in heuristic.go against.
func refJudge(b []byte) verdict {
	if len(b) > MaxUncompressed {
		b = b[:MaxUncompressed]
	}
	var sample []byte
	for s := 0; s+16 < len(b); s += 256 { // start <= end_inclusive - 16
		sample = append(sample, b[s:s+16]...)
	}
	half := len(sample) / 2
	if bytes.Equal(sample[:half], sample[half:2*half]) {
		return verdictRepeated
	}
	counts := make([]int, 256)
	for _, c := range sample {
		counts[c]++
	}
	set := 0
	for _, c := range counts {
		if c > 0 {
			set++
		}
	}
	if set < 64 {
		return verdictByteSet
	}
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	limit := len(sample) * 90 / 100
	sum, i := 0, 0
	for ; i < 64; i++ {
		sum += sorted[i]
	}
	if sum <= limit {
		for ; i < 200 && sorted[i] > 0; i++ {
			sum += sorted[i]
			if sum > limit {
				break
			}
		}
	}
	if i <= 64 {
		return verdictCoreLow
	}
	if i >= 200 {
		return verdictNo
	}
	if refEntropy(counts, len(sample)) < 80 {
		return verdictEntropy
	}
	return verdictNoEntropy
}

func refLog(x int) int {
	return bits.Len64(uint64(x)*uint64(x)*uint64(x)*uint64(x)) - 1
}

func refEntropy(counts []int, n int) int {
	sum := 0
	for _, c := range counts {
		if c > 0 {
			sum += c * (refLog(n) - refLog(c))
		}
	}
	return sum / n * 100 / 32
}

// group is part of a wanted byte distribution: n distinct byte values that
// each occur count times in the sample.
type group struct{ n, count int }

// sampleFrom returns a shuffled sample holding the distribution gs (byte
// values assigned in order from a random permutation). The counts must sum
// to the sample size wanted.
func sampleFrom(r *rand.Rand, gs []group) []byte {
	vals := r.Perm(256)
	var s []byte
	for _, g := range gs {
		for range g.n {
			v := byte(vals[0])
			vals = vals[1:]
			s = append(s, bytes.Repeat([]byte{v}, g.count)...)
		}
	}
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// placeSample returns n bytes whose heuristic sample is exactly sample (its
// length must be 16 times the number of sample starts in n bytes); the bytes
// the heuristic does not read are random, to show they do not matter.
func placeSample(r *rand.Rand, sample []byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for k := 0; k*16 < len(sample); k++ {
		copy(b[k*256:k*256+16], sample[k*16:k*16+16])
	}
	return b
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestWorthBranches builds inputs that end at each step of the heuristic,
// on both sides of each threshold. The entropy percentage takes only the
// values floor(m*100/32) for whole m (…, 75, 78, 81, …), so its < 80
// threshold falls between 78 and 81.
func TestWorthBranches(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 1))
	const full = MaxUncompressed
	dist := func(gs ...group) func() []byte {
		return func() []byte { return placeSample(r, sampleFrom(r, gs), full) }
	}
	cases := []struct {
		name string
		make func() []byte
		want verdict
		k    int // wanted core set size (top counts needed), 0: unchecked
		ent  int // wanted entropy percentage, -1: unchecked
	}{
		{"zeros", func() []byte { return make([]byte, full) }, verdictRepeated, 0, -1},
		{"halves equal", func() []byte { h := randBytes(r, full/2); return append(h, h...) }, verdictRepeated, 0, -1},
		{"halves differ in last byte", func() []byte {
			h := randBytes(r, full/2)
			b := append(h, h...)
			b[full-256+15] ^= 1 // last byte of the last sample
			return b
		}, verdictNo, 0, -1},
		{"byte set 63", dist(group{2, 131}, group{61, 130}), verdictByteSet, 0, -1},
		{"byte set 64", dist(group{64, 128}), verdictCoreLow, 58, -1},
		// 65 top values needed: index 64, still "low" although entropy is high.
		{"core 65", dist(group{65, 114}, group{18, 5}, group{173, 4}), verdictCoreLow, 65, 81},
		{"core 66", dist(group{66, 112}, group{40, 5}, group{150, 4}), verdictNoEntropy, 66, 81},
		// One dominant value and 255 rare ones: wide core set, low entropy.
		{"core 200", dist(group{1, 4400}, group{222, 15}, group{33, 14}), verdictEntropy, 200, 59},
		{"core 201", dist(group{1, 4380}, group{242, 15}, group{13, 14}), verdictNo, 201, 59},
		{"entropy 68", dist(group{69, 39}, group{11, 306}, group{7, 305}), verdictEntropy, 66, 68},
		{"entropy 78", dist(group{66, 1}, group{62, 113}, group{10, 112}), verdictEntropy, 66, 78},
		{"entropy 81", dist(group{66, 1}, group{70, 107}, group{6, 106}), verdictNoEntropy, 69, 81},
		{"random", func() []byte { return randBytes(r, full) }, verdictNo, 0, -1},
		{"empty", func() []byte { return nil }, verdictRepeated, 0, -1},
		{"1 byte", func() []byte { return []byte{7} }, verdictRepeated, 0, -1},
		{"16 random bytes", func() []byte { return randBytes(r, 16) }, verdictRepeated, 0, -1},
		// 17 bytes: one start, 16 bytes of sample of at most 16 values.
		{"17 random bytes", func() []byte { return randBytes(r, 17) }, verdictByteSet, 0, -1},
		{"256 random bytes", func() []byte { return randBytes(r, 256) }, verdictByteSet, 0, -1},
		// 4096 bytes: 16 starts, 256 sample bytes.
		{"4096 random bytes", func() []byte { return dist(group{256, 1})()[:4096] }, verdictNo, 0, -1},
		{"4096 of 64 values", func() []byte { return placeSample(r, sampleFrom(r, []group{{64, 4}}), 4096) }, verdictCoreLow, 0, -1},
	}
	for _, c := range cases {
		b := c.make()
		got, ref := judge(b), refJudge(b)
		if got != c.want || ref != c.want || Worth(b) != (c.want < verdictNo) {
			t.Errorf("%s: judge %d, reference %d, want %d", c.name, got, ref, c.want)
		}
		counts, size := sampleCounts(b)
		if c.k != 0 {
			if k := topNeeded(counts, size); k != c.k {
				t.Errorf("%s: core set needs %d values, want %d", c.name, k, c.k)
			}
		}
		if c.ent >= 0 {
			if e := refEntropy(counts, size); e != c.ent {
				t.Errorf("%s: entropy %d%%, want %d%%", c.name, e, c.ent)
			}
		}
	}
}

// sampleCounts returns the byte counts of b's sample and its size.
func sampleCounts(b []byte) ([]int, int) {
	counts := make([]int, 256)
	n := 0
	for s := 0; s+16 < min(len(b), MaxUncompressed); s += 256 {
		for _, c := range b[s : s+16] {
			counts[c]++
			n++
		}
	}
	return counts, n
}

// topNeeded returns how many of the largest counts it takes to exceed 90%
// of the sample.
func topNeeded(counts []int, size int) int {
	s := slices.Clone(counts)
	slices.Sort(s)
	slices.Reverse(s)
	sum := 0
	for i, c := range s {
		sum += c
		if sum > size*90/100 {
			return i + 1
		}
	}
	return len(s)
}

// TestWorthSampling checks which bytes the heuristic reads: the 16 at each
// multiple of 256 that end before the last byte, and nothing past 128 KiB.
func TestWorthSampling(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 2))
	for _, n := range []int{16, 17, 18, 255, 256, 272, 273, 528, 529, 4095, 4096, 4097, 100000,
		MaxUncompressed - 1, MaxUncompressed, MaxUncompressed + 1, 3 * MaxUncompressed} {
		// Zeros everywhere except one random byte at each position in turn
		// around the sample starts: the answer flips from "repeated" exactly
		// when the byte is read.
		for _, pos := range []int{0, 15, 16, 255, 256, 271, 272, n - 17, n - 16, n - 1,
			MaxUncompressed - 257, MaxUncompressed - 256, MaxUncompressed - 241, MaxUncompressed - 240} {
			if pos < 0 || pos >= n {
				continue
			}
			b := make([]byte, n)
			b[pos] = byte(1 + r.IntN(255))
			read := pos < MaxUncompressed && pos%256 < 16 && pos-pos%256+16 < min(n, MaxUncompressed)
			if got := judge(b) != verdictRepeated; got != read {
				t.Errorf("len %d, byte at %d: sampled %v, want %v", n, pos, got, read)
			}
			if judge(b) != refJudge(b) {
				t.Errorf("len %d, byte at %d: judge %d, reference %d", n, pos, judge(b), refJudge(b))
			}
		}
	}
}

// TestWorthOddHalves covers samples with an odd number of starts, whose
// halves split one start's 16 bytes.
func TestWorthOddHalves(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 3))
	const n = 2*256 + 17 // three starts: 48 sample bytes, halves of 24
	half := randBytes(r, 24)
	b := placeSample(r, append(slices.Clone(half), half...), n)
	if judge(b) != verdictRepeated || refJudge(b) != verdictRepeated {
		t.Fatalf("equal halves across a split start: judge %d, reference %d", judge(b), refJudge(b))
	}
	b[2*256+15] ^= 0x80
	if judge(b) == verdictRepeated || judge(b) != refJudge(b) {
		t.Fatalf("unequal halves: judge %d, reference %d", judge(b), refJudge(b))
	}
}

// TestWorthMatchesReference compares the two implementations on random
// inputs shaped to land near every threshold: alphabets of many sizes,
// skewed distributions, short and long inputs.
func TestWorthMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 4))
	seen := map[verdict]int{}
	inputs := 500
	if os.Getenv("GOBTRFS_LONG") != "" {
		inputs = 20000
	}
	for i := range inputs {
		b := heurInput(r)
		got, ref := judge(b), refJudge(b)
		seen[got]++
		if got != ref {
			t.Fatalf("input %d (len %d): judge %d, reference %d", i, len(b), got, ref)
		}
	}
	t.Logf("inputs ending at each step: %v", seen)
	for v := verdictRepeated; v <= verdictNoEntropy; v++ {
		if seen[v] == 0 {
			t.Errorf("no input ended at step %d (counts %v)", v, seen)
		}
	}
}

// heurInput returns a random input for TestWorthMatchesReference: bytes
// drawn from a random distribution over a random alphabet, sometimes with
// equal halves, of random length around one extent.
func heurInput(r *rand.Rand) []byte {
	n := MaxUncompressed
	switch r.IntN(4) {
	case 0:
		n = r.IntN(5000)
	case 1:
		n = r.IntN(2 * MaxUncompressed)
	}
	// A table of 1024 symbols holds the distribution: a power of a uniform
	// variable skews it towards small symbols.
	var table [1024]byte
	alpha := 1 + r.IntN(256)
	skew := int(r.Float64() * 3)
	for i := range table {
		u := r.Float64()
		for range skew {
			u *= r.Float64()
		}
		table[i] = byte(int(u * float64(alpha)))
	}
	if r.IntN(3) == 0 {
		// Exactly uniform over 256 values, plus a dominant value in a
		// random share: core sets around 200.
		for i := range table {
			table[i] = byte(i)
		}
		clear(table[:r.IntN(700)])
	}
	b := make([]byte, n)
	for i := 0; i < n; i += 6 {
		x := r.Uint64()
		for j := i; j < min(n, i+6); j++ {
			b[j] = table[x&1023]
			x >>= 10
		}
	}
	if r.IntN(8) == 0 && n > 1 {
		copy(b[n/2:], b[:n/2])
	}
	return b
}

// TestWorthNoAlloc: Worth runs on every 128 KiB written.
func TestWorthNoAlloc(t *testing.T) {
	b := genRandom(1, MaxUncompressed)
	if a := testing.AllocsPerRun(100, func() { Worth(b) }); a != 0 {
		t.Fatalf("Worth allocates %v times per call", a)
	}
}

func FuzzWorth(f *testing.F) {
	f.Add([]byte{})
	f.Add(genText(1, 20000))
	f.Add(genRandom(2, 4096))
	f.Add(make([]byte, 600))
	f.Add(genInput("short", 3, 9000))
	f.Add(genInput("repeat", 4, 70000))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := judge(b)
		if again := judge(b); again != got {
			t.Fatalf("not deterministic: %d then %d", got, again)
		}
		if ref := refJudge(b); ref != got {
			t.Fatalf("judge %d, reference %d", got, ref)
		}
		if Worth(b) != (got < verdictNo) {
			t.Fatal("Worth disagrees with judge")
		}
		// Longer than an extent: only the first 128 KiB count.
		long := append(slices.Clone(b), make([]byte, MaxUncompressed)...)
		long = append(long, b...)
		if Worth(long) != Worth(long[:MaxUncompressed]) {
			t.Fatal("bytes after 128 KiB changed the answer")
		}
	})
}

func BenchmarkWorth(b *testing.B) {
	for _, kind := range []string{"text", "random", "zeros"} {
		src := genInput(kind, 1, MaxUncompressed)
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				Worth(src)
			}
		})
	}
}
