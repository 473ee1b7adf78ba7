package btrfs_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
)

var dataSeed = flag.Int64("data-seed", 0, "replay the TestData*Interop random sequences with this seed")

// dataFile is the model of one file: its bytes and which sectors hold
// data (as SEEK_DATA sees it) rather than holes or preallocated space.
type dataFile struct {
	b    []byte
	data []bool // per sector
	nsum bool   // NODATASUM (made with NODATACOW)
}

// dataModel is what the files of one test image must hold.
type dataModel struct {
	t     *testing.T
	fsys  *btrfs.FS
	rng   *rand.Rand
	ss    int
	files map[string]*dataFile
	log   []string
	small bool // keep files small (for the small fixture image)
	devs  []string
}

func (m *dataModel) must(err error, what string) {
	m.t.Helper()
	if err != nil {
		m.t.Fatalf("%s: %v\nops:\n%s", what, err, m.history())
	}
}

func (m *dataModel) history() string {
	start := max(0, len(m.log)-30)
	var b bytes.Buffer
	for _, l := range m.log[start:] {
		fmt.Fprintln(&b, "  ", l)
	}
	return b.String()
}

func (m *dataModel) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
}

// setSize resizes the model of f, new sectors holes.
func (f *dataFile) setSize(n, ss int) {
	if n < len(f.b) {
		f.b = f.b[:n]
	} else {
		f.b = append(f.b, make([]byte, n-len(f.b))...)
	}
	secs := (n + ss - 1) / ss
	if secs < len(f.data) {
		f.data = f.data[:secs]
	} else {
		f.data = append(f.data, make([]bool, secs-len(f.data))...)
	}
}

func (f *dataFile) mark(a, b, ss int, v bool) {
	for s := a / ss; s*ss < b && s < len(f.data); s++ {
		f.data[s] = v
	}
}

// payload makes n bytes, a mix of random and compressible runs.
func (m *dataModel) payload(n int) []byte {
	b := make([]byte, n)
	switch m.rng.Intn(3) {
	case 0:
		m.rng.Read(b)
	case 1:
		for i := range b {
			b[i] = byte(i / 512)
		}
	default:
		for i := 0; i < n; i += 4096 {
			if m.rng.Intn(2) == 0 {
				m.rng.Read(b[i:min(n, i+4096)])
			} else {
				copy(b[i:min(n, i+4096)], bytes.Repeat([]byte("btrfs "), 700))
			}
		}
	}
	return b
}

func (m *dataModel) pick() (string, *dataFile) {
	names := make([]string, 0, len(m.files))
	for n := range m.files {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "", nil
	}
	n := names[m.rng.Intn(len(names))]
	return n, m.files[n]
}

func (m *dataModel) length() int {
	switch m.rng.Intn(4) {
	case 0:
		return 1 + m.rng.Intn(100)
	case 1:
		return 1 + m.rng.Intn(5000)
	case 2:
		return m.ss * (1 + m.rng.Intn(40))
	}
	if m.small {
		return 1 + m.rng.Intn(64<<10)
	}
	return 1 + m.rng.Intn(400<<10)
}

func (m *dataModel) offset(f *dataFile) int {
	switch m.rng.Intn(3) {
	case 0:
		return m.rng.Intn(len(f.b) + 1)
	case 1:
		return m.ss * m.rng.Intn(300)
	}
	if m.small {
		return m.rng.Intn(256 << 10)
	}
	return m.rng.Intn(1 << 20)
}

// step runs one random operation on fsys and the model.
func (m *dataModel) step(i int) {
	ss := m.ss
	name, f := m.pick()
	switch r := m.rng.Intn(20); {
	case r < 3 || f == nil:
		name = fmt.Sprintf("f%d", m.rng.Intn(10))
		sizes := []int{0, 1, 700, 2048, 2049, 4095, 4096, 5000, 65536, 131073, 300000}
		n := sizes[m.rng.Intn(len(sizes))]
		b := m.payload(n)
		m.logf("%d WriteFile %s %d", i, name, n)
		m.must(m.fsys.WriteFile(name, b, 0o644), "WriteFile "+name)
		old := m.files[name]
		nf := &dataFile{b: b, nsum: old != nil && old.nsum}
		nf.setSize(n, ss)
		nf.mark(0, n, ss, true)
		m.files[name] = nf
	case r < 9:
		off, n := m.offset(f), m.length()
		b := m.payload(n)
		m.logf("%d WriteAt %s off %d len %d (size %d)", i, name, off, n, len(f.b))
		_, err := m.fsys.WriteAt(name, b, int64(off))
		m.must(err, "WriteAt "+name)
		if off+n > len(f.b) {
			f.setSize(off+n, ss)
		}
		copy(f.b[off:], b)
		f.mark(off, off+n, ss, true)
	case r < 11:
		size := m.offset(f)
		m.logf("%d Truncate %s %d (size %d)", i, name, size, len(f.b))
		m.must(m.fsys.Truncate(name, int64(size)), "Truncate "+name)
		f.setSize(size, ss)
	case r < 13:
		off, n := m.offset(f), m.length()
		m.logf("%d PunchHole %s off %d len %d (size %d)", i, name, off, n, len(f.b))
		m.must(m.fsys.PunchHole(name, int64(off), int64(n)), "PunchHole "+name)
		end := min(off+n, len(f.b))
		if off < end {
			clear(f.b[off:end])
			a, b := (off+ss-1)/ss*ss, end/ss*ss
			if end == len(f.b) {
				b = (end + ss - 1) / ss * ss
			}
			if a < b {
				f.mark(a, b, ss, false)
			}
		}
	case r < 14:
		off, n := m.offset(f), m.length()
		keep := m.rng.Intn(2) == 0
		m.logf("%d Fallocate %s off %d len %d keep %v (size %d)", i, name, off, n, keep, len(f.b))
		m.must(m.fsys.Fallocate(name, int64(off), int64(n), keep), "Fallocate "+name)
		if !keep && off+n > len(f.b) {
			f.setSize(off+n, ss)
		}
	case r < 17:
		m.clone(i)
	case r < 18:
		m.logf("%d Remove %s", i, name)
		m.must(m.fsys.Remove(name), "Remove "+name)
		delete(m.files, name)
	default:
		off, n := m.offset(f), m.length()*4
		b := m.payload(n)
		m.logf("%d WriteFrom %s off %d len %d", i, name, off, n)
		got, err := m.fsys.WriteFrom(name, bytes.NewReader(b), int64(off))
		m.must(err, "WriteFrom "+name)
		if got != int64(n) {
			m.t.Fatalf("WriteFrom wrote %d of %d", got, n)
		}
		if off+n > len(f.b) {
			f.setSize(off+n, ss)
		}
		copy(f.b[off:], b)
		f.mark(off, off+n, ss, true)
	}
}

// clone shares a random aligned range between two model files.
func (m *dataModel) clone(i int) {
	ss := m.ss
	sname, sf := m.pick()
	dname, df := m.pick()
	if len(sf.b) < ss || sf.nsum != df.nsum {
		return
	}
	soff := m.rng.Intn(len(sf.b)/ss) * ss
	n := min(len(sf.b)-soff, ss*(1+m.rng.Intn(64)))
	if n%ss != 0 && n != len(sf.b)-soff {
		n = n / ss * ss
	}
	doff := m.rng.Intn(len(df.b)/ss+2) * ss
	if n%ss != 0 && doff+n < len(df.b) {
		n = n / ss * ss
	}
	if n == 0 || (sname == dname && soff < doff+n && doff < soff+n) {
		return
	}
	m.logf("%d Clone %s %d -> %s %d len %d", i, sname, soff, dname, doff, n)
	m.must(m.fsys.Clone(sname, int64(soff), dname, int64(doff), int64(n)), "Clone")
	src := append([]byte(nil), sf.b[soff:soff+n]...)
	srcData := append([]bool(nil), sf.data[soff/ss:(soff+n+ss-1)/ss]...)
	if doff+n > len(df.b) {
		df.setSize(doff+n, ss)
	}
	copy(df.b[doff:], src)
	copy(df.data[doff/ss:], srcData)
}

// compareFS reads every model file through fsys, and checks its
// data/hole layout as the read path sees it.
func (m *dataModel) compareFS(fsys *btrfs.FS, when string) {
	m.t.Helper()
	for name, f := range m.files {
		m.compareFSHoles(fsys, name, f, when)
		got, err := fsys.ReadFile(name)
		if err != nil {
			m.t.Fatalf("%s: read %s: %v\n%s", when, name, err, m.history())
		}
		if !bytes.Equal(got, f.b) {
			m.t.Fatalf("%s: %s differs from the model (len %d, want %d) at %d\n%s", when, name, len(got), len(f.b), firstDiff(got, f.b), m.history())
		}
	}
}

// compareFSHoles compares the sectors past the first that SeekDataAt
// reports as data with the model.
func (m *dataModel) compareFSHoles(fsys *btrfs.FS, name string, f *dataFile, when string) {
	m.t.Helper()
	fd, err := fsys.OpenFile(name)
	if err != nil {
		m.t.Fatal(err)
	}
	defer fd.Close()
	ss, size := int64(m.ss), int64(len(f.b))
	for s := int64(1); s < int64(len(f.data)); s++ {
		d, err := fd.SeekDataAt(s * ss)
		isData := err == nil && d == s*ss
		if err != nil && !errors.Is(err, syscall.ENXIO) {
			m.t.Fatal(err)
		}
		if !isData && err == nil && d < min((s+1)*ss, size) {
			isData = true
		}
		if isData != f.data[s] {
			m.t.Fatalf("%s: %s sector %d: data %v, model %v\n%s", when, name, s, isData, f.data[s], m.history())
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// compareKernel mounts the image read-only and checks contents, sizes
// and the data/hole layout (sectors past the first, which may be an
// inline extent) against the model.
func (m *dataModel) compareKernel(devs []string) {
	m.t.Helper()
	dir := btrfstest.Mount(m.t, "ro", devs...)
	defer btrfstest.Unmount(m.t, dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		m.t.Fatal(err)
	}
	if len(ents) != len(m.files) {
		m.t.Errorf("kernel sees %d files, model %d", len(ents), len(m.files))
	}
	for name, f := range m.files {
		p := filepath.Join(dir, name)
		got, err := os.ReadFile(p)
		if err != nil {
			m.t.Fatalf("kernel read %s: %v\n%s", name, err, m.history())
		}
		if !bytes.Equal(got, f.b) {
			m.t.Fatalf("kernel: %s differs (len %d, want %d) at %d\n%s", name, len(got), len(f.b), firstDiff(got, f.b), m.history())
		}
		m.compareHoles(p, name, f)
	}
}

// compareHoles walks SEEK_DATA/SEEK_HOLE over the file.
func (m *dataModel) compareHoles(path, name string, f *dataFile) {
	fd, err := os.Open(path)
	if err != nil {
		m.t.Fatal(err)
	}
	defer fd.Close()
	ss, size := m.ss, len(f.b)
	kdata := make([]bool, len(f.data))
	for pos := int64(0); pos < int64(size); {
		d, err := unix.Seek(int(fd.Fd()), pos, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil {
			m.t.Fatal(err)
		}
		h, err := unix.Seek(int(fd.Fd()), d, unix.SEEK_HOLE)
		if err != nil {
			m.t.Fatal(err)
		}
		for s := d / int64(ss); s*int64(ss) < h && s < int64(len(kdata)); s++ {
			kdata[s] = true
		}
		pos = h
	}
	for s := 1; s < len(f.data); s++ {
		if kdata[s] != f.data[s] {
			if os.Getenv("GOBTRFS_DATA_DUMP") != "" {
				st, _ := os.Stat(path)
				out, _ := exec.Command("sh", "-c", fmt.Sprintf("btrfs inspect-internal dump-tree -t 5 %s | grep -A4 '(%d EXTENT_DATA'", m.devs[0], st.Sys().(*syscall.Stat_t).Ino)).CombinedOutput()
				m.t.Logf("%s", out)
				py := `import os,sys
fd=os.open(sys.argv[1],os.O_RDONLY); p=0; size=os.fstat(fd).st_size
while p<size:
  try: d=os.lseek(fd,p,os.SEEK_DATA)
  except OSError: break
  h=os.lseek(fd,d,os.SEEK_HOLE); print("data",d,h); p=h
print("size",size)`
				out, _ = exec.Command("python3", "-c", py, path).CombinedOutput()
				exec.Command("cp", m.devs[0], "/tmp/hdata/fail.img").Run()
				m.t.Logf("%s", out)
			}
			m.t.Fatalf("kernel: %s sector %d (offset %d): data %v, model %v\n%s", name, s, s*ss, kdata[s], f.data[s], m.history())
		}
	}
}

// dataConfig is one image layout for the random test.
type dataConfig struct {
	name     string
	mkfs     btrfstest.MkfsOptions
	multi    bool
	opts     btrfs.Options
	rounds   int
	ops      int
	nodatsum bool
}

func dataConfigs() []dataConfig {
	return []dataConfig{
		{name: "default", rounds: 4, ops: 80, nodatsum: true},
		{name: "4k-nodes-xxhash-zlib-holes", mkfs: btrfstest.MkfsOptions{NodeSize: 4096, Csum: "xxhash", Features: "^no-holes"},
			opts: btrfs.Options{Compress: "zlib", CompressLevel: 9}, rounds: 4, ops: 80},
		{name: "sha256-lzo", mkfs: btrfstest.MkfsOptions{Csum: "sha256"}, opts: btrfs.Options{Compress: "lzo"}, rounds: 3, ops: 80, nodatsum: true},
		{name: "blake2-zstd-force", mkfs: btrfstest.MkfsOptions{Csum: "blake2", NodeSize: 4096},
			opts: btrfs.Options{Compress: "zstd", CompressLevel: -3, CompressForce: true}, rounds: 3, ops: 80},
		{name: "zstd15-maxinline", opts: btrfs.Options{Compress: "zstd", CompressLevel: 15, MaxInline: 3000}, rounds: 3, ops: 60},
		{name: "raid1", mkfs: btrfstest.MkfsOptions{DataProfile: "raid1", MetadataProfile: "raid1"}, multi: true,
			rounds: 3, ops: 80, nodatsum: true},
		// The other multi-device kinds mkfs.btrfs makes (docs/design/0021).
		{name: "raid1c3", mkfs: btrfstest.MkfsOptions{NumDevices: 3, DataProfile: "raid1c3", MetadataProfile: "raid1c3"}, multi: true,
			rounds: 2, ops: 60},
		{name: "raid1c4", mkfs: btrfstest.MkfsOptions{NumDevices: 4, DataProfile: "raid1c4", MetadataProfile: "raid1c4"}, multi: true,
			rounds: 2, ops: 60},
		{name: "raid5", mkfs: btrfstest.MkfsOptions{NumDevices: 3, DataProfile: "raid5", MetadataProfile: "raid5"}, multi: true,
			rounds: 2, ops: 60, nodatsum: true},
		{name: "raid6", mkfs: btrfstest.MkfsOptions{NumDevices: 4, DataProfile: "raid6", MetadataProfile: "raid6"}, multi: true,
			rounds: 2, ops: 60},
	}
}

// TestDataRandomInterop runs random file-data sequences against a model
// with commits in between; after every commit btrfs check (with data
// checksums) must be clean and the kernel must read the model's bytes
// and holes. Then the kernel changes the files and check stays clean.
func TestDataRandomInterop(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := *dataSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay: -data-seed %d)", seed, seed)
	for ci, cfg := range dataConfigs() {
		t.Run(cfg.name, func(t *testing.T) {
			runDataConfig(t, cfg, seed+int64(ci))
		})
	}
}

func runDataConfig(t *testing.T, cfg dataConfig, seed int64) {
	var devs []string
	if cfg.multi {
		devs = btrfstest.MkfsMulti(t, cfg.mkfs)
	} else {
		devs = []string{btrfstest.Mkfs(t, cfg.mkfs)}
	}
	opts := cfg.opts
	opts.Devices = devs[1:]
	fsys, err := btrfs.OpenWritable(devs[0], &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	m := &dataModel{t: t, fsys: fsys, rng: rand.New(rand.NewSource(seed)), ss: int(fsys.SectorSize()), files: map[string]*dataFile{}}
	growDataSpace(t, fsys, 30<<20)
	m.devs = devs
	if cfg.nodatsum {
		m.must(fsys.CreateEmpty("nosum", 0o644), "create nosum")
		m.must(fsys.SetInodeFlags("nosum", uint64(disk.InodeNoDataCow), 0), "chattr +C")
		m.files["nosum"] = &dataFile{nsum: true}
	}
	for round := range cfg.rounds {
		for i := range cfg.ops {
			m.step(round*1000 + i)
			if os.Getenv("GOBTRFS_DATA_DEBUG") != "" {
				m.compareFS(fsys, "after step")
			}
		}
		m.compareFS(fsys, "before commit")
		m.must(fsys.Commit(), "commit")
		m.compareFS(fsys, "after commit")
		btrfstest.Check(t, devs, true)
		m.compareKernel(devs)
		total := 0
		for _, f := range m.files {
			total += len(f.b)
		}
		t.Logf("round %d: %d ops, %d files, %d bytes", round, len(m.log), len(m.files), total)
	}
	m.must(fsys.Close(), "close")
	kernelChanges(t, devs, m)
}

// kernelChanges lets the kernel overwrite, append to and delete model
// files, then checks the image.
func kernelChanges(t *testing.T, devs []string, m *dataModel) {
	dir := btrfstest.Mount(t, "", devs...)
	names := make([]string, 0, len(m.files))
	for name := range m.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		f := m.files[name]
		p := filepath.Join(dir, name)
		switch i % 3 {
		case 0:
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		case 1:
			fd, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fd.WriteAt(bytes.Repeat([]byte("k"), 10000), int64(len(f.b)/2)); err != nil {
				t.Fatal(err)
			}
			fd.Close()
		default:
			fd, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fd.Write([]byte("appended by the kernel")); err != nil {
				t.Fatal(err)
			}
			fd.Close()
		}
	}
	btrfstest.Unmount(t, dir)
	btrfstest.Check(t, devs, true)
}
