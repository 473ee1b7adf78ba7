package btrfs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/fsview"
	"github.com/gobtrfs/btrfs/mkfs"
	"golang.org/x/sys/unix"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the random write tests (0: random; GOBTRFS_SEED works too)")

// testSeed returns the seed of a randomized test (from -seed, GOBTRFS_SEED
// or fresh) and logs how to replay it.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if s := os.Getenv("GOBTRFS_SEED"); seed == 0 && s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GOBTRFS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay: go test -run '^%s$' -seed %d .)", seed, t.Name(), seed)
	return seed
}

func longTests() bool { return os.Getenv("GOBTRFS_LONG") == "1" }

// The operations being added to the write API. They are called through
// these interfaces so that the tests build, and skip an operation, while
// it does not exist yet.
type (
	linker interface {
		Link(oldname, newname string) error
	}
	renamer interface {
		Rename(oldname, newname string) error
	}
	symlinker interface {
		Symlink(oldname, newname string) error
	}
	mknoder interface {
		Mknod(name string, mode fs.FileMode, dev uint64) error
	}
	chowner interface {
		Chown(name string, uid, gid int) error
	}
	xattrRemover interface{ Removexattr(name, attr string) error }
	mkdirAller   interface {
		MkdirAll(name string, perm fs.FileMode) error
	}
	removeAller interface{ RemoveAll(name string) error }
)

// opWeights are the relative frequencies of the operations.
var opWeights = []struct {
	kind string
	w    int
}{
	{"mkdir", 12}, {"create", 14}, {"remove", 12}, {"chmod", 5}, {"chtimes", 5},
	{"setxattr", 12}, {"link", 6}, {"rename", 8}, {"symlink", 5}, {"mknod", 4},
	{"chown", 4}, {"removexattr", 4}, {"mkdirall", 2}, {"removeall", 1},
}

// availableOps lists the operations fsys has.
func availableOps(fsys *btrfs.FS) map[string]bool {
	var f any = fsys
	has := func(ok bool) bool { return ok }
	_, link := f.(linker)
	_, ren := f.(renamer)
	_, sym := f.(symlinker)
	_, mkn := f.(mknoder)
	_, cho := f.(chowner)
	_, rmx := f.(xattrRemover)
	_, mka := f.(mkdirAller)
	_, rma := f.(removeAller)
	return map[string]bool{"mkdir": true, "create": true, "remove": true, "chmod": true,
		"chtimes": true, "setxattr": true, "link": has(link), "rename": has(ren),
		"symlink": has(sym), "mknod": has(mkn), "chown": has(cho), "removexattr": has(rmx),
		"mkdirall": has(mka), "removeall": has(rma)}
}

// runner applies operations to an FS and to the model side by side.
type runner struct {
	t      *testing.T
	fsys   *btrfs.FS
	m      *model
	r      *rand.Rand
	seed   uint64
	avail  map[string]bool
	log    []string // the last operations, for failure reports
	n      int
	counts map[string]int
	queue  []*rop // operations gen hands out before making new ones
	// checkNewer also runs btrfs-progs 6.19's check (btrfstest.CheckNewer),
	// on images not made by mkfs.btrfs 6.2, whose stale free-space-tree
	// entries 6.19 reports.
	checkNewer bool
}

func newRunner(t *testing.T, fsys *btrfs.FS, m *model, seed uint64) *runner {
	ru := &runner{t: t, fsys: fsys, m: m, seed: seed, counts: map[string]int{},
		r: rand.New(rand.NewPCG(seed, uint64(crc32.ChecksumIEEE([]byte(t.Name())))))}
	ru.setFS(fsys)
	return ru
}

// setFS points the runner at a (re)opened FS.
func (ru *runner) setFS(fsys *btrfs.FS) {
	ru.fsys = fsys
	ru.avail = availableOps(fsys)
	var missing []string
	for _, o := range opWeights {
		if !ru.avail[o.kind] {
			missing = append(missing, o.kind)
		}
	}
	if len(missing) > 0 {
		ru.t.Logf("write API lacks %v: those operations are not generated", missing)
	}
}

// do runs o on the FS and checks the outcome against the model.
func (ru *runner) do(o *rop) {
	ru.t.Helper()
	want, alt, apply := ru.m.plan(o)
	err := ru.exec(o)
	ru.n++
	line := fmt.Sprintf("#%d %v -> %s (model: %s)", ru.n, o, describeErr(err), describeErr(want))
	if ru.log = append(ru.log, line); len(ru.log) > 25 {
		ru.log = ru.log[1:]
	}
	switch {
	case errnoMatch(err, want):
		if want == nil {
			apply()
			ru.counts[o.kind+": ok"]++
		} else {
			ru.counts[o.kind+": "+errnoName(err)]++
		}
	case alt == errAlsoOK && err == nil:
		apply()
		ru.counts[fmt.Sprintf("%s: ok, Linux: %v", o.kind, errnoName(want))]++
	case alt != nil && errnoMatch(err, alt):
		ru.counts[fmt.Sprintf("%s: %v, Linux: %v", o.kind, errnoName(err), errnoName(want))]++
	case want != nil && err != nil && !errors.Is(err, btrfs.ErrAborted):
		ru.t.Errorf("seed %d op #%d %v: got %v, want %v", ru.seed, ru.n, o, err, want)
	default:
		ru.t.Fatalf("seed %d op #%d %v: got %v, model says %s\nlast operations:\n%s",
			ru.seed, ru.n, o, err, describeErr(want), strings.Join(ru.log, "\n"))
	}
}

// errnoName names the errno in err.
func errnoName(err error) string {
	var e syscall.Errno
	switch {
	case errors.As(err, &e):
		return unix.ErrnoName(e)
	case errors.Is(err, fs.ErrInvalid):
		return "fs.ErrInvalid"
	}
	return fmt.Sprint(err)
}

// exec calls the API for o.
func (ru *runner) exec(o *rop) error {
	var f any = ru.fsys
	switch o.kind {
	case "mkdir":
		return ru.fsys.Mkdir(o.a, o.perm)
	case "create":
		return ru.fsys.CreateEmpty(o.a, o.perm)
	case "remove":
		return ru.fsys.Remove(o.a)
	case "chmod":
		return ru.fsys.Chmod(o.a, o.perm)
	case "chtimes":
		return ru.fsys.Chtimes(o.a, o.atime, o.mtime)
	case "setxattr":
		return ru.fsys.Setxattr(o.a, o.attr, o.value)
	case "link":
		return f.(linker).Link(o.a, o.b)
	case "rename":
		return f.(renamer).Rename(o.a, o.b)
	case "symlink":
		return f.(symlinker).Symlink(o.b, o.a)
	case "mknod":
		return f.(mknoder).Mknod(o.a, o.perm, o.dev)
	case "chown":
		return f.(chowner).Chown(o.a, o.uid, o.gid)
	case "removexattr":
		return f.(xattrRemover).Removexattr(o.a, o.attr)
	case "mkdirall":
		return f.(mkdirAller).MkdirAll(o.a, o.perm)
	case "removeall":
		return f.(removeAller).RemoveAll(o.a)
	}
	return fmt.Errorf("unknown op %s", o.kind)
}

// randomOps runs n generated operations.
func (ru *runner) randomOps(n int) {
	ru.t.Helper()
	for range n {
		ru.do(ru.gen())
	}
}

// gen makes one random operation, valid or not.
func (ru *runner) gen() *rop {
	if len(ru.queue) == 0 && ru.avail["link"] && ru.r.IntN(150) == 0 {
		ru.linkBurst()
	}
	if len(ru.queue) > 0 {
		o := ru.queue[0]
		ru.queue = ru.queue[1:]
		return o
	}
	total := 0
	for _, o := range opWeights {
		if ru.avail[o.kind] {
			total += o.w
		}
	}
	k := ru.r.IntN(total)
	o := &rop{}
	for _, w := range opWeights {
		if !ru.avail[w.kind] {
			continue
		}
		if k -= w.w; k < 0 {
			o.kind = w.kind
			break
		}
	}
	switch o.kind {
	case "mkdir", "create", "symlink", "mknod", "mkdirall":
		o.a = ru.newPath()
	case "link", "rename":
		o.a, o.b = ru.existing(), ru.newPath()
		if o.kind == "rename" && ru.r.IntN(3) == 0 {
			o.b = ru.existing() // replace, or a kind clash
		}
	default:
		o.a = ru.existing()
	}
	ru.genArgs(o)
	return o
}

// genArgs fills in the arguments other than paths.
func (ru *runner) genArgs(o *rop) {
	r := ru.r
	o.perm = fs.FileMode(r.IntN(0o1000))
	if r.IntN(8) == 0 {
		o.perm |= []fs.FileMode{fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky}[r.IntN(3)]
	}
	switch o.kind {
	case "symlink":
		o.b = ru.name(1 + r.IntN(3))
		switch r.IntN(12) {
		case 0:
			o.b = "/" + strings.Repeat("t", r.IntN(1000))
		case 1:
			o.b = strings.Repeat("u", []int{0, 3948, 3949, 3950, 4094, 4095, 4096}[r.IntN(7)])
		}
	case "mknod":
		o.perm |= []fs.FileMode{fs.ModeNamedPipe, fs.ModeSocket, fs.ModeDevice,
			fs.ModeDevice | fs.ModeCharDevice}[r.IntN(4)]
		o.dev = linuxDev(uint32(r.IntN(4096)), uint32(r.IntN(1<<20)))
	case "chown":
		o.uid, o.gid = r.IntN(70000), r.IntN(70000)
		switch r.IntN(10) {
		case 0:
			o.uid = -1
		case 1:
			o.gid = -1
		case 2:
			o.gid = 1<<32 - 1 // EINVAL
		}
	case "chtimes":
		o.atime = time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()
		o.mtime = time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()
	case "setxattr", "removexattr":
		o.attr, o.value = ru.xattr()
	}
}

// linuxDev encodes a device number as Linux's dev_t (glibc makedev).
func linuxDev(major, minor uint32) uint64 {
	return uint64(minor&0xff) | uint64(major&0xfff)<<8 | uint64(minor&^0xff)<<12 | uint64(major&^0xfff)<<32
}

// xattr picks an attribute name (mostly valid, a few names so that
// replacing and removing happen) and a value.
func (ru *runner) xattr() (string, []byte) {
	r := ru.r
	ns := []string{"user.", "trusted.", "security.", "user.", "user."}[r.IntN(5)]
	name := ns + "a" + strconv.Itoa(r.IntN(6))
	switch r.IntN(40) {
	case 3, 4, 5:
		name = xattrTwins()[r.IntN(4)][r.IntN(2)] // one XATTR_ITEM for two names
	case 0:
		name = "other.x" // EOPNOTSUPP
	case 1:
		name = "user." + strings.Repeat("l", 251+r.IntN(2)) // 256 or 257 bytes: ERANGE
	case 2:
		name = "user." + strings.Repeat("m", 250) // exactly 255
	}
	size := r.IntN(64)
	switch r.IntN(30) {
	case 0:
		size = ru.m.maxItem - dirItemBase - len(name) + r.IntN(3) - 1 // around the limit
	case 1:
		size = r.IntN(ru.m.maxItem)
	}
	v := make([]byte, max(size, 0))
	for i := range v {
		v[i] = byte(r.IntN(256))
	}
	return name, v
}

// Names that share a name hash, found once per test binary.
var (
	nameTwins  = sync.OnceValue(func() [][2]string { return hashTwins("h", 6) })
	xattrTwins = sync.OnceValue(func() [][2]string { return hashTwins("user.h", 4) })
)

// linkBurst queues many long-named hard links of one inode in one
// directory, more than its INODE_REF item holds, so that names spill into
// INODE_EXTREF items (and later removes and renames meet them).
func (ru *runner) linkBurst() {
	src, dir := ru.pick(), ru.dir()
	for try := 0; try < 8 && ru.m.nodes[src].e.Type == btrfstest.TypeDir; try++ {
		src = ru.pick()
	}
	for i := range 20 + ru.r.IntN(20) {
		name := fmt.Sprintf("%03d-%s", i, strings.Repeat("e", 200+ru.r.IntN(52)))
		ru.queue = append(ru.queue, &rop{kind: "link", a: src, b: joinPath(dir, name)})
	}
}

// name makes one path component: short names from a small pool (so that
// EEXIST happens), sometimes odd or long ones.
func (ru *runner) name(pool int) string {
	r := ru.r
	switch r.IntN(40) {
	case 0:
		return strings.Repeat("L", 200+r.IntN(56)) // up to 255
	case 1:
		return strings.Repeat("x", 256) // ENAMETOOLONG
	case 2:
		return "sp ace-é-" + strconv.Itoa(r.IntN(5))
	case 4, 5:
		return nameTwins()[r.IntN(6)][r.IntN(2)] // one DIR_ITEM for two names
	case 3:
		b := make([]byte, 1+r.IntN(12)) // any byte but NUL and '/'
		for i := range b {
			for b[i] == 0 || b[i] == '/' {
				b[i] = byte(r.IntN(256))
			}
		}
		if s := string(b); s != "." && s != ".." {
			return s
		}
	}
	return "n" + strconv.Itoa(r.IntN(pool*10))
}

// existing picks a path, mostly one the model holds.
func (ru *runner) existing() string {
	r := ru.r
	switch r.IntN(25) {
	case 0:
		return ru.dir() + "/missing" // mostly ENOENT
	case 1:
		return ru.pick() + "/under" // ENOTDIR under a file
	case 2:
		return []string{"a/../b", "/abs", "trail/", ""}[r.IntN(4)]
	}
	return ru.pick()
}

// newPath picks a path for a new name, mostly in an existing directory.
func (ru *runner) newPath() string {
	if ru.r.IntN(12) == 0 {
		return ru.existing()
	}
	return joinPath(ru.dir(), ru.name(4))
}

func (ru *runner) pick() string { return ru.m.list[ru.r.IntN(len(ru.m.list))] }

// dir picks a directory of the model, "." when none turns up soon.
func (ru *runner) dir() string {
	for range 8 {
		p := ru.pick()
		if ru.m.nodes[p].e.Type == btrfstest.TypeDir {
			return p
		}
	}
	return "."
}

// ourTree renders the FS's own read view as a btrfstest.Tree.
func ourTree(t *testing.T, fsys *btrfs.FS) *btrfstest.Tree {
	t.Helper()
	tr := &btrfstest.Tree{Entries: map[string]*btrfstest.Entry{}}
	inodes := map[uint64][]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := fsys.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*btrfs.Stat)
		e := &btrfstest.Entry{Path: p, Ino: st.Ino, Perm: st.Mode & 0o7777, UID: st.UID, GID: st.GID,
			Nlink: st.Nlink, Size: int64(st.Size), MtimeNs: st.Mtime.UnixNano(),
			RdevMajor: st.RdevMajor, RdevMinor: st.RdevMinor}
		e.Type = typeOfMode(st.Mode)
		switch e.Type {
		case btrfstest.TypeRegular:
			b, err := fsys.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			e.SHA256 = hex.EncodeToString(s[:])
		case btrfstest.TypeSymlink:
			if e.Target, err = fsys.ReadLink(p); err != nil {
				return err
			}
		}
		if e.Type != btrfstest.TypeCharDev && e.Type != btrfstest.TypeBlockDev {
			e.RdevMajor, e.RdevMinor = 0, 0
		}
		xs, err := fsys.Xattrs(p)
		if err != nil {
			return err
		}
		for _, x := range xs {
			if e.Xattrs == nil {
				e.Xattrs = map[string]string{}
			}
			e.Xattrs[x.Name] = string(x.Value)
		}
		tr.Entries[p] = e
		if e.Type != btrfstest.TypeDir {
			inodes[st.Ino] = append(inodes[st.Ino], p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking our read view: %v", err)
	}
	for _, g := range inodes {
		if len(g) > 1 {
			tr.Links = append(tr.Links, g)
		}
	}
	return tr
}

func typeOfMode(mode uint32) btrfstest.FileType {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return btrfstest.TypeRegular
	case syscall.S_IFDIR:
		return btrfstest.TypeDir
	case syscall.S_IFLNK:
		return btrfstest.TypeSymlink
	case syscall.S_IFIFO:
		return btrfstest.TypeFifo
	case syscall.S_IFSOCK:
		return btrfstest.TypeSocket
	case syscall.S_IFCHR:
		return btrfstest.TypeCharDev
	case syscall.S_IFBLK:
		return btrfstest.TypeBlockDev
	}
	return 0
}

// compareModel diffs got (a scan or our read view) with the model and
// fails the test with the differences.
func (ru *runner) compareModel(what string, got *btrfstest.Tree, holes bool) {
	ru.t.Helper()
	want := ru.m.tree(got, holes)
	diff := btrfstest.Diff(want, got, btrfstest.DiffOptions{CompareNlink: true, IgnoreHoles: !holes,
		IgnoreXattr: func(n string) bool { return n == "security.selinux" }})
	if len(diff) > 0 {
		if len(diff) > 30 {
			diff = append(diff[:30], fmt.Sprintf("... %d more", len(diff)-30))
		}
		ru.t.Fatalf("seed %d: %s differs from the model after op #%d:\n%s\nlast operations:\n%s",
			ru.seed, what, ru.n, strings.Join(diff, "\n"), strings.Join(ru.log, "\n"))
	}
}

// commitAndCompare commits, then checks the image with btrfs check and
// compares both our read view and a kernel mount with the model.
func (ru *runner) commitAndCompare(devs []string) {
	ru.t.Helper()
	if err := ru.fsys.Commit(); err != nil {
		ru.t.Fatalf("seed %d: commit after op #%d: %v", ru.seed, ru.n, err)
	}
	ru.compareModel("our read view", ourTree(ru.t, ru.fsys), false)
	btrfstest.Check(ru.t, devs, false)
	if ru.checkNewer {
		btrfstest.CheckNewer(ru.t, devs[0], false)
	}
	dir := btrfstest.Mount(ru.t, "ro", devs...)
	got, err := btrfstest.Scan(dir)
	btrfstest.Unmount(ru.t, dir)
	if err != nil {
		ru.t.Fatal(err)
	}
	ru.compareModel("the kernel's mount", got, true)
}

// kernelChanges mounts the image read-write and lets the kernel make
// changes of its own (mkdir, a file with data, rename, unlink, setxattr,
// chmod), applied to the model too.
func (ru *runner) kernelChanges(devs []string) {
	t := ru.t
	t.Helper()
	dir := btrfstest.Mount(t, "", devs...)
	abs := func(p string) string { return dir + "/" + p }
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("kernel %s: %v", what, err)
		}
	}
	for i := range 4 {
		p := joinPath(ru.plainDir(), fmt.Sprintf("kdir-%d", i))
		if want, _, _ := ru.m.plan(&rop{kind: "mkdir", a: p}); want == nil {
			must("mkdir", os.Mkdir(abs(p), 0o750))
			must("chmod", os.Chmod(abs(p), 0o750))
			ru.m.create(p, &mNode{e: btrfstest.Entry{Type: btrfstest.TypeDir, Perm: 0o750, GID: ru.inheritedGID(p)}, kernel: true})
		}
		p = joinPath(ru.plainDir(), fmt.Sprintf("kfile-%d", i))
		if want, _, _ := ru.m.plan(&rop{kind: "create", a: p}); want == nil {
			data := []byte(strings.Repeat("kernel data ", 1+i*500))
			must("write", os.WriteFile(abs(p), data, 0o640))
			must("chmod", os.Chmod(abs(p), 0o640))
			s := sha256.Sum256(data)
			ru.m.create(p, &mNode{e: btrfstest.Entry{Type: btrfstest.TypeRegular, Perm: 0o640, GID: ru.inheritedGID(p),
				Size: int64(len(data)), SHA256: hex.EncodeToString(s[:]),
				Data: []btrfstest.Range{{Off: 0, Len: int64(len(data))}}}, hasData: true, kernel: true})
		}
		src, dst := ru.pick(), joinPath(ru.dir(), fmt.Sprintf("kren-%d", i))
		if want, _, apply := ru.m.plan(&rop{kind: "rename", a: src, b: dst}); want == nil && src != dst {
			must("rename", os.Rename(abs(src), abs(dst)))
			apply()
		}
		if p := ru.pick(); ru.m.nodes[p].e.Type != btrfstest.TypeDir {
			must("unlink", os.Remove(abs(p)))
			ru.m.unlink(p)
		}
		p = ru.pick()
		val := fmt.Sprintf("kernel-%d", i)
		must("setxattr", unix.Lsetxattr(abs(p), "trusted.kernel", []byte(val), 0))
		n := ru.m.nodes[p]
		if n.e.Xattrs == nil {
			n.e.Xattrs = map[string]string{}
		}
		n.e.Xattrs["trusted.kernel"] = val
	}
	btrfstest.Unmount(t, dir)
}

// plainDir picks a directory without a default ACL, where what the kernel
// makes gets just the mode it is given.
func (ru *runner) plainDir() string {
	for range 8 {
		if d := ru.dir(); ru.m.nodes[d].e.Xattrs["system.posix_acl_default"] == "" {
			return d
		}
	}
	return "."
}

// inheritedGID is the group the kernel gives a new inode at p made by
// root: the parent's group when the parent is set-group-ID.
func (ru *runner) inheritedGID(p string) uint32 {
	if d := ru.m.nodes[parentDir(p)]; d.e.Perm&0o2000 != 0 {
		return d.e.GID
	}
	return 0
}

// logCounts logs how many operations of each kind succeeded or failed,
// and the known divergences from Linux met (each with its count).
func (ru *runner) logCounts() {
	keys := make([]string, 0, len(ru.counts))
	for k := range ru.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %d", k, ru.counts[k])
	}
	ru.t.Logf("%d operations:%s", ru.n, b.String())
}

// randomImage is one image kind the random test runs on.
type randomImage struct {
	name     string
	mkfs     btrfstest.MkfsOptions
	populate bool // the kernel fills the image first (files with data, links, special files, a big directory)
	// ours formats with our mkfs (its defaults: mkfs.btrfs 6.19's, with
	// the block-group tree, which mkfs.btrfs 6.2 cannot make) instead.
	ours bool
	// v1 makes the image with the v1 space cache (makeV1Image), which
	// the first commit converts to the free-space tree.
	v1 bool
	// incompat must be set and noIncompat clear in the superblock, so
	// the variant tests the form it is named after.
	incompat, noIncompat uint64
}

var randomImages = []randomImage{
	{name: "4K-crc32c", mkfs: btrfstest.MkfsOptions{NodeSize: 4096, MetadataProfile: "single"}},
	{name: "64K-xxhash", mkfs: btrfstest.MkfsOptions{NodeSize: 65536, Csum: "xxhash"}},
	{name: "16K-sha256", mkfs: btrfstest.MkfsOptions{Csum: "sha256"}},
	{name: "16K-blake2", mkfs: btrfstest.MkfsOptions{Csum: "blake2"}},
	{name: "dup-metadata", mkfs: btrfstest.MkfsOptions{MetadataProfile: "dup", DataProfile: "single"}},
	{name: "raid1-2dev", mkfs: btrfstest.MkfsOptions{NumDevices: 2, MetadataProfile: "raid1", DataProfile: "raid1"}},
	{name: "kernel-populated-4K", mkfs: btrfstest.MkfsOptions{NodeSize: 4096}, populate: true},
	{name: "block-group-tree-4K", ours: true, mkfs: btrfstest.MkfsOptions{NodeSize: 4096}, populate: true},
	{name: "v1-space-cache", v1: true, populate: true},
	// Tree blocks as EXTENT_ITEMs with a tree block info (no skinny
	// metadata), and data and metadata sharing DATA|METADATA groups.
	{name: "no-skinny-4K", mkfs: btrfstest.MkfsOptions{NodeSize: 4096, Features: "^skinny-metadata"}, populate: true,
		noIncompat: disk.IncompatSkinnyMetadata},
	{name: "mixed-4K", mkfs: btrfstest.MkfsOptions{NodeSize: 4096, Extra: []string{"--mixed"}}, populate: true,
		incompat: disk.IncompatMixedGroups},
	// The same made by our mkfs (with the block-group tree, so
	// btrfs-progs 6.19's check runs too); the kernel fills the 6.2 ones.
	{name: "no-skinny-ours-4K", ours: true, mkfs: btrfstest.MkfsOptions{NodeSize: 4096, Features: "^skinny-metadata"},
		noIncompat: disk.IncompatSkinnyMetadata},
	{name: "mixed-ours-4K", ours: true, mkfs: btrfstest.MkfsOptions{NodeSize: 4096, Features: "mixed-bg"},
		incompat: disk.IncompatMixedGroups},
}

// TestRandomWrite runs random operation sequences on every image kind:
// after each commit btrfs check is clean and the kernel shows the model's
// tree; then the kernel changes the image, check stays clean, and another
// session of ours continues on the kernel's result.
func TestRandomWrite(t *testing.T) {
	btrfstest.RequireInterop(t)
	for _, im := range randomImages {
		t.Run(im.name, func(t *testing.T) { runRandomImage(t, im) })
	}
}

func runRandomImage(t *testing.T, im randomImage) {
	seed := testSeed(t)
	ops, commits := 1600, 2
	if longTests() {
		ops, commits = 8000, 8
	}
	var devs []string
	switch {
	case im.v1:
		img, _ := makeV1Image(t, seed, func(dir string) { populateDir(t, dir, int64(seed)) })
		devs = []string{img}
	case im.ours:
		devs = []string{filepath.Join(t.TempDir(), "ours.img")}
		var feats []string
		if im.mkfs.Features != "" {
			feats = strings.Split(im.mkfs.Features, ",")
		}
		if err := mkfs.Format(devs[0], mkfs.Options{Size: btrfstest.DefaultImageSize, NodeSize: im.mkfs.NodeSize, Features: feats}); err != nil {
			t.Fatal(err)
		}
	case im.mkfs.NumDevices > 1:
		devs = btrfstest.MkfsMulti(t, im.mkfs)
	default:
		devs = []string{btrfstest.Mkfs(t, im.mkfs)}
	}
	nodesize := im.mkfs.NodeSize
	if nodesize == 0 {
		nodesize = 16384
	}
	m := newModel(nodesize, &mNode{e: btrfstest.Entry{Type: btrfstest.TypeDir, Perm: 0o755}})
	switch {
	case im.v1:
		m = scanModel(t, devs, nodesize)
	case im.populate:
		m = populateImage(t, devs, nodesize, int64(seed))
	}
	fsys := openWritable(t, devs)
	if f := fsview.Of(fsys).Superblock().IncompatFlags; f&im.incompat != im.incompat || f&im.noIncompat != 0 {
		t.Fatalf("incompat flags %#x: want %#x set and %#x clear", f, im.incompat, im.noIncompat)
	}
	ru := newRunner(t, fsys, m, seed)
	ru.checkNewer = im.ours || im.v1 // a v1 image gets its free-space tree from us
	for range commits {
		ru.randomOps(ops / commits)
		ru.commitAndCompare(devs)
		if im.v1 {
			requireConverted(t, devs[0])
		}
	}
	// Work that is never committed: Rollback drops it.
	saved := ru.m.clone()
	ru.randomOps(ops / commits / 4)
	if err := ru.fsys.Rollback(); err != nil {
		t.Fatal(err)
	}
	ru.m = saved
	ru.compareModel("our read view after rolling back uncommitted work", ourTree(t, ru.fsys), false)
	// Work left uncommitted at Close: Close commits it, as an unmount.
	ru.randomOps(ops / commits / 4)
	if err := ru.fsys.Close(); err != nil {
		t.Fatal(err)
	}
	ru.setFS(openWritable(t, devs))
	ru.compareModel("our read view after Close committed", ourTree(t, ru.fsys), false)
	if err := ru.fsys.Close(); err != nil {
		t.Fatal(err)
	}
	ru.kernelChanges(devs)
	btrfstest.Check(t, devs, false)
	fsys = openWritable(t, devs)
	ru.setFS(fsys)
	ru.compareModel("our read view after the kernel's changes", ourTree(t, fsys), false)
	ru.randomOps(ops / commits)
	ru.commitAndCompare(devs)
	ru.logCounts()
}

// populateImage lets the kernel fill the image and returns its model.
func populateImage(t *testing.T, devs []string, nodesize int, seed int64) *model {
	t.Helper()
	dir := btrfstest.Mount(t, "", devs...)
	populateDir(t, dir, seed)
	btrfstest.Unmount(t, dir)
	return scanModel(t, devs, nodesize)
}

// populateDir is what the kernel writes into a populated image.
func populateDir(t *testing.T, dir string, seed int64) {
	t.Helper()
	btrfstest.PopulateFiles(t, dir, seed)
	btrfstest.PopulateSpecial(t, dir, seed)
	btrfstest.PopulateLinks(t, dir, seed)
	btrfstest.PopulateXattrs(t, dir, seed)
	btrfstest.PopulateNames(t, dir, seed)
	btrfstest.PopulateModes(t, dir, seed)
	n := 800
	if longTests() {
		n = 10000
	}
	btrfstest.PopulateBigDir(t, dir, seed, n)
}

// scanModel is the model of what the kernel shows of devs.
func scanModel(t *testing.T, devs []string, nodesize int) *model {
	t.Helper()
	dir := btrfstest.Mount(t, "ro", devs...)
	tree, err := btrfstest.Scan(dir)
	btrfstest.Unmount(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	return modelFromTree(nodesize, tree)
}

// openWritable opens devs[0] (with the others) for writing. A cleanup
// closes it (again) if the test stops early; Close is idempotent.
func openWritable(t *testing.T, devs []string) *btrfs.FS {
	t.Helper()
	// No commits of the FS's own (dirty limit, ENOSPC flush, interval):
	// the model's Rollback goes back to the last Commit it made.
	fsys, err := btrfs.OpenWritable(devs[0], &btrfs.Options{Devices: devs[1:], DirtyLimit: -1, CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

// TestRandomWriteHeightAndChunks fills a small 4 KiB-node image with large
// xattrs (one leaf each) among random operations, until the subvolume
// tree is three levels high and the first metadata chunk overflows into a
// new one; after each commit check, kernel and model agree.
func TestRandomWriteHeightAndChunks(t *testing.T) {
	btrfstest.RequireInterop(t)
	seed := testSeed(t)
	// Single metadata on a small image: mkfs makes an 8 MiB metadata chunk
	// (DUP: 32 MiB, for the long run).
	mk := btrfstest.MkfsOptions{NodeSize: 4096, Size: 256 << 20, MetadataProfile: "single"}
	total := 3300 // 4 KiB leaves, past the first metadata chunk
	if longTests() {
		mk.MetadataProfile, total = "dup", 12000
	}
	img := btrfstest.Mkfs(t, mk)
	devs := []string{img}
	fsys := openWritable(t, devs)
	chunks0 := fsview.Of(fsys).ChunkMap().Len()
	m := newModel(4096, &mNode{e: btrfstest.Entry{Type: btrfstest.TypeDir, Perm: 0o755}})
	ru := newRunner(t, fsys, m, seed)
	const perFile, rounds = 40, 3
	level := 0
	for round := range rounds {
		for k := round * total / rounds; k < (round+1)*total/rounds; k++ {
			f := fmt.Sprintf("big%04d", k/perFile)
			if k%perFile == 0 {
				ru.do(&rop{kind: "mkdir", a: f, perm: 0o755})
			}
			v := make([]byte, 3500)
			for i := range v {
				v[i] = byte(ru.r.Uint32())
			}
			ru.do(&rop{kind: "setxattr", a: f, attr: fmt.Sprintf("user.big%02d", k%perFile), value: v})
			if k%25 == 0 {
				ru.do(ru.gen())
			}
		}
		ru.commitAndCompare(devs)
		level = fsTreeLevel(t, fsys)
		t.Logf("round %d: %d ops, fs tree root level %d, %d chunks (mkfs made %d)",
			round, ru.n, level, fsview.Of(fsys).ChunkMap().Len(), chunks0)
	}
	if level < 2 {
		t.Errorf("fs tree root level %d, want at least 2 (height 3)", level)
	}
	if n := fsview.Of(fsys).ChunkMap().Len(); n <= chunks0 {
		t.Errorf("%d chunks after filling metadata, mkfs made %d: no new chunk", n, chunks0)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	ru.kernelChanges(devs)
	btrfstest.Check(t, devs, false)
	ru.setFS(openWritable(t, devs))
	ru.compareModel("our read view after the kernel's changes", ourTree(t, ru.fsys), false)
	ru.logCounts()
}

// fsTreeLevel returns the level of the top-level subvolume tree's root.
func fsTreeLevel(t *testing.T, fsys *btrfs.FS) int {
	t.Helper()
	trees, err := fsview.Of(fsys).Trees()
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trees {
		if tr.ID == 5 {
			return tr.Root.Level
		}
	}
	t.Fatal("no fs tree in the root tree")
	return 0
}
