package btrfs_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/compress"
)

var heurSeed = flag.Uint64("heuristic-seed", 0, "replay TestHeuristicInterop with this seed")

// heurClass is one file of TestHeuristicInterop: data whose every 128 KiB
// piece gets the same heuristic answer, so the kernel stores the file all
// compressed or all plain.
type heurClass struct {
	name string
	data []byte
}

// TestHeuristicInterop proves compress.Worth agrees with Linux. Each class
// of data is written as its own file through a compress=zstd mount (not
// compress-force, so the kernel runs its heuristic), and the extents the
// kernel made are read back with dump-tree. The heuristic's answer is
// visible on disk whatever the codec does: "no" leaves the file plain with
// no inode flag, while "yes" either compresses it or, when zstd saves no
// sector, marks the inode NOCOMPRESS.
func TestHeuristicInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := *heurSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run TestHeuristicInterop -args -heuristic-seed=%d)", seed, seed)
	classes := heurClasses(rand.New(rand.NewPCG(seed, 0)))

	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{})
	dir := btrfstest.Mount(t, "compress=zstd", img)
	inos := make([]uint64, len(classes))
	for i, c := range classes {
		p := filepath.Join(dir, fmt.Sprintf("c%02d", i))
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		inos[i] = st.Sys().(*syscall.Stat_t).Ino
	}
	syscall.Sync()
	btrfstest.Unmount(t, dir)
	files := dumpFileExtents(t, img)

	var table bytes.Buffer
	fmt.Fprintf(&table, "%-24s %6s %8s %6s %6s %7s | %-14s %s\n", "class", "Worth", "unpadded", "saves", "zstd3", "size", "compressed/all", "NOCOMPRESS")
	failed := false
	for i, c := range classes {
		worth, saves, zstd3 := heurExpect(t, c)
		f := files[inos[i]]
		if f == nil {
			t.Fatalf("%s: inode %d not found in dump-tree", c.name, inos[i])
		}
		nocomp := f.flags&heurNoCompress != 0
		kernelYes := f.compressed > 0 || nocomp
		mark := ""
		if kernelYes != worth || (f.compressed > 0) != (worth && saves) ||
			(f.compressed != 0 && f.compressed != f.extents) {
			mark, failed = "  <-- MISMATCH", true
		}
		raw := compress.Worth(c.data[len(c.data)-(len(c.data)-1)%compress.MaxUncompressed-1:])
		fmt.Fprintf(&table, "%-24s %6v %8v %6v %6v %7d | %3d/%-3d        %v%s\n", c.name, worth, raw, saves, zstd3, len(c.data),
			f.compressed, f.extents, nocomp, mark)
	}
	if failed {
		t.Errorf("kernel and compress.Worth disagree (seed %d):\n%s", seed, table.String())
	} else {
		t.Logf("\n%s", table.String())
	}
	btrfstest.Check(t, []string{img}, true)
}

// heurNoCompress is the inode flag the kernel sets when a compression
// attempt saves nothing (BTRFS_INODE_NOCOMPRESS).
const heurNoCompress = 1 << 3

// heurExpect returns Worth's answer for c (the same for each 128 KiB piece,
// or the test's data is wrong), whether compression saves a sector on the
// first piece (see heurProxies), and whether our zstd level 3 does. Like
// the kernel, Worth sees a short last piece padded with zeros to a sector.
func heurExpect(t *testing.T, c heurClass) (worth, saves, zstd3 bool) {
	t.Helper()
	for off := 0; off < len(c.data); off += compress.MaxUncompressed {
		piece := c.data[off:min(len(c.data), off+compress.MaxUncompressed)]
		w := compress.Worth(heurPad(piece))
		if off == 0 {
			worth = w
		} else if w != worth {
			t.Fatalf("%s: piece at %d gets %v, the first %v: class not uniform", c.name, off, w, worth)
		}
	}
	first := c.data[:min(len(c.data), compress.MaxUncompressed)]
	for _, e := range heurProxies {
		_, ok, err := compress.Compress(e.typ, first, e.level, 4096)
		if err != nil {
			t.Fatal(err)
		}
		saves = saves || ok
		zstd3 = zstd3 || (ok && e.typ == compress.Zstd && e.level == 3)
	}
	return worth, saves, zstd3
}

// heurPad returns b zero-padded to a multiple of 4 KiB (the sector size).
func heurPad(b []byte) []byte {
	return append(bytes.Clone(b), make([]byte, (4096-len(b)%4096)%4096)...)
}

// heurProxies stand in for the kernel's zstd level 3 in deciding whether
// a piece saves a sector. Our zstd encoder at level 3 alone is not enough:
// it stores data without matches (e.g. random bytes from 16 symbols) as raw
// blocks, where the kernel's entropy-codes the literals and saves half.
var heurProxies = []struct {
	typ   compress.Type
	level int
}{{compress.Zstd, 3}, {compress.Zstd, 9}, {compress.Zlib, 3}}

// heurFile is what dump-tree says about one inode.
type heurFile struct {
	flags      uint64
	extents    int // EXTENT_DATA items
	compressed int // of which compressed
}

var (
	heurItemRe  = regexp.MustCompile(`^\s+item \d+ key \((\d+) (\w+) \d+\)`)
	heurFlagsRe = regexp.MustCompile(`\bflags (0x[0-9a-f]+)`)
	heurCompRe  = regexp.MustCompile(`\bcompression (\d+)`)
)

// dumpFileExtents parses `btrfs inspect-internal dump-tree -t 5` of the
// unmounted image: per inode number, the inode flags and the extent counts.
func dumpFileExtents(t *testing.T, img string) map[uint64]*heurFile {
	t.Helper()
	out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", "5", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-tree: %v\n%s", err, out)
	}
	files := map[uint64]*heurFile{}
	var cur *heurFile
	var kind string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := heurItemRe.FindStringSubmatch(line); m != nil {
			ino, _ := strconv.ParseUint(m[1], 10, 64)
			if files[ino] == nil {
				files[ino] = &heurFile{}
			}
			cur, kind = files[ino], m[2]
			if kind == "EXTENT_DATA" {
				cur.extents++
			}
			continue
		}
		if cur == nil {
			continue
		}
		switch {
		case kind == "INODE_ITEM" && heurFlagsRe.MatchString(line):
			cur.flags, _ = strconv.ParseUint(strings.TrimPrefix(heurFlagsRe.FindStringSubmatch(line)[1], "0x"), 16, 64)
		case kind == "EXTENT_DATA" && heurCompRe.MatchString(line):
			if heurCompRe.FindStringSubmatch(line)[1] != "0" {
				cur.compressed++
			}
		}
	}
	return files
}

// heurClasses returns the data classes: both answers, each step of the
// heuristic deciding, and both sides of its thresholds.
func heurClasses(r *rand.Rand) []heurClass {
	const piece = compress.MaxUncompressed
	cs := []heurClass{
		{"zeros", make([]byte, piece)},
		{"random", heurUniform(r, piece, 256)},
		{"text", heurText(r, piece)},
		{"halves", heurHalves(r, piece)},
		// 64-byte periods of 32 random bytes and 32 of a constant: zstd
		// halves it, but every sample falls in the random half.
		{"random32-const32", heurPeriodic(r, piece)},
		// Random data whose sampled bytes are zero: the heuristic says yes
		// and zstd saves the 16 zeros of every 256 bytes.
		{"random-zero-samples", heurZeroSamples(r, piece)},
		// Random data whose sampled 16-byte runs in the second 64 KiB
		// repeat those of the first: the sample's halves are equal, but
		// zstd saves less than a sector, so the kernel tries, fails and
		// flags the inode NOCOMPRESS.
		{"random-repeated-samples", heurRepeatedSamples(r, piece)},
		{"random-1MiB", heurUniform(r, 8*piece, 256)},
		{"text-1MiB", heurText(r, 8*piece)},
		{"alphabet48-1MiB", heurUniform(r, 8*piece, 48)},
		// Sizes that are not sector multiples: the kernel's sample takes in
		// the zeros after EOF in the last sector, which turn its answer for
		// random data to yes (and so NOCOMPRESS, as nothing is saved).
		{"random-4196", heurUniform(r, 4096+100, 256)},
		{"random-12588", heurUniform(r, 12288+300, 256)},
		{"random-130000", heurUniform(r, 130000, 256)},
	}
	for _, n := range []int{16, 48, 64, 80, 128, 200, 256} {
		cs = append(cs, heurClass{fmt.Sprintf("alphabet%d", n), heurUniform(r, piece, n)})
	}
	// One frequent byte with probability p, the rest uniform over m values:
	// wide core sets whose entropy sweeps across 65-85%.
	for _, pm := range []struct {
		p float64
		m int
	}{{0.1, 128}, {0.2, 128}, {0.25, 128}, {0.3, 128}, {0.4, 128}, {0.2, 96}, {0.3, 160}, {0.5, 256}, {0.55, 256}, {0.6, 256}} {
		cs = append(cs, heurClass{fmt.Sprintf("dominant%.2f-of%d", pm.p, pm.m), heurDominant(r, piece, pm.p, pm.m)})
	}
	// Exact samples on both sides of the core set index (k values needed to
	// cover 90%: k=65 is index 64, still "low"; k=201 is index 200) and of
	// the entropy threshold (78% and 81% are adjacent values).
	for _, e := range []struct {
		name string
		gs   []heurGroup
	}{
		{"core65", []heurGroup{{65, 114}, {18, 5}, {173, 4}}},
		{"core66", []heurGroup{{66, 112}, {40, 5}, {150, 4}}},
		{"core200", []heurGroup{{1, 4400}, {222, 15}, {33, 14}}},
		{"core201", []heurGroup{{1, 4380}, {242, 15}, {13, 14}}},
		{"entropy78", []heurGroup{{66, 1}, {62, 113}, {10, 112}}},
		{"entropy81", []heurGroup{{66, 1}, {70, 107}, {6, 106}}},
		{"byteset63", []heurGroup{{2, 131}, {61, 130}}},
	} {
		cs = append(cs, heurClass{e.name, heurExact(r, piece, e.gs)})
	}
	return cs
}

func heurUniform(r *rand.Rand, n, alphabet int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(alphabet))
	}
	return b
}

// heurText is lines of random words: a small byte set.
func heurText(r *rand.Rand, n int) []byte {
	words := []string{"extent", "chunk", "stripe", "inode", "leaf", "node", "subvolume", "the", "of", "zstd"}
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "%d %s %s %s.\n", r.IntN(100000), words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

func heurHalves(r *rand.Rand, n int) []byte {
	h := heurUniform(r, n/2, 256)
	return append(h, h...)
}

func heurPeriodic(r *rand.Rand, n int) []byte {
	b := heurUniform(r, n, 256)
	for i := 32; i < n; i += 64 {
		copy(b[i:i+32], bytes.Repeat([]byte{'z'}, 32))
	}
	return b
}

func heurZeroSamples(r *rand.Rand, n int) []byte {
	b := heurUniform(r, n, 256)
	for i := 0; i < n; i += 256 {
		clear(b[i : i+16])
	}
	return b
}

func heurRepeatedSamples(r *rand.Rand, n int) []byte {
	b := heurUniform(r, n, 256)
	for i := 0; i < n/2; i += 256 {
		copy(b[n/2+i:n/2+i+16], b[i:i+16])
	}
	return b
}

func heurDominant(r *rand.Rand, n int, p float64, m int) []byte {
	b := make([]byte, n)
	for i := range b {
		if r.Float64() < p {
			b[i] = 0
		} else {
			b[i] = byte(1 + r.IntN(m-1))
		}
	}
	return b
}

// heurGroup is n byte values each occurring count times in a sample.
type heurGroup struct{ n, count int }

// heurExact returns n bytes (one piece) whose heuristic sample holds
// exactly the distribution gs (counts summing to 8192); every other byte is
// drawn from the same distribution, so the file compresses like its sample.
func heurExact(r *rand.Rand, n int, gs []heurGroup) []byte {
	vals := r.Perm(256)
	var pool []byte
	for _, g := range gs {
		for range g.n {
			pool = append(pool, bytes.Repeat([]byte{byte(vals[0])}, g.count)...)
			vals = vals[1:]
		}
	}
	if len(pool) != n/256*16 {
		panic(fmt.Sprintf("heurExact: sample of %d bytes, want %d", len(pool), n/256*16))
	}
	r.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	b := make([]byte, n)
	for i := range b {
		b[i] = pool[r.IntN(len(pool))]
	}
	for k := 0; k*16 < len(pool); k++ {
		copy(b[k*256:k*256+16], pool[k*16:k*16+16])
	}
	return b
}
