package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gobtrfs/btrfs"
)

// config is what one run measures.
type config struct {
	work       string        // scratch directory: images, mount points, binaries
	imageSize  int64         // bytes of each btrfs image
	totalSize  string        // sysbench --file-total-size
	files      int           // sysbench --file-num
	runTime    time.Duration // per sysbench run
	modes      []string      // sysbench --file-test-mode values
	threads    []int         // sysbench --threads values
	targets    []string      // of ours, loopback, kernel
	metadata   bool          // the untar / rm -rf row
	cpuProfile string        // gobtrfs mount --cpuprofile
	mountOpts  string        // gobtrfs mount -o
}

// result is one row's figure per target: MiB/s for sysbench, seconds for
// the metadata steps.
type result map[string]float64

// row is one line of the table.
type row struct {
	name    string
	seconds bool // a time (lower is better) rather than a rate
	r       result
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve-loopback" {
		if len(os.Args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: fusepeer serve-loopback SRC MNT")
			os.Exit(2)
		}
		if err := serveLoopback(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "fusepeer serve-loopback:", err)
			os.Exit(1)
		}
		return
	}
	c := config{}
	var modes, threads, targets string
	var runSecs int
	flag.StringVar(&c.work, "work", "", "scratch directory (default: a new one under /var/tmp, removed at the end)")
	flag.Int64Var(&c.imageSize, "image-size", 4<<30, "size in bytes of each btrfs image")
	flag.StringVar(&c.totalSize, "size", "256M", "sysbench --file-total-size")
	flag.IntVar(&c.files, "files", 16, "sysbench --file-num")
	flag.IntVar(&runSecs, "time", 10, "seconds per sysbench run")
	flag.StringVar(&modes, "modes", "seqwr,rndwr,seqrd,rndrd", "sysbench --file-test-mode values, comma separated")
	flag.StringVar(&threads, "threads", "16,512", "sysbench --threads values, comma separated")
	flag.StringVar(&targets, "targets", "ours,loopback,kernel", "what to measure, comma separated: ours, loopback, kernel")
	flag.BoolVar(&c.metadata, "metadata", true, "also untar Go's source tree and rm -rf it")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "profile our daemon into this file (gobtrfs mount --cpuprofile)")
	flag.StringVar(&c.mountOpts, "o", "", "gobtrfs mount -o options")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: fusepeer [flags]\n\n"+
			"Runs sysbench fileio and an untar/rm -rf of Go's source tree on gobtrfs mount,\n"+
			"go-fuse's loopback over the kernel's btrfs, and the kernel's btrfs; prints a\n"+
			"Markdown table with the ratios. Needs root.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	c.runTime = time.Duration(runSecs) * time.Second
	c.modes = strings.Split(modes, ",")
	for _, t := range strings.Split(threads, ",") {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fusepeer: bad -threads %q\n", threads)
			os.Exit(2)
		}
		c.threads = append(c.threads, n)
	}
	c.targets = strings.Split(targets, ",")
	for _, t := range c.targets {
		if t != "ours" && t != "loopback" && t != "kernel" {
			fmt.Fprintf(os.Stderr, "fusepeer: unknown target %q\n", t)
			os.Exit(2)
		}
	}
	if err := run(&c); err != nil {
		fmt.Fprintln(os.Stderr, "fusepeer:", err)
		os.Exit(1)
	}
}

// run measures every target and prints the table.
func run(c *config) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root (loop devices, mounts)")
	}
	for _, tool := range []string{"sysbench", "mkfs.btrfs", "losetup", "fusermount3", "tar", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found", tool)
		}
	}
	if c.work == "" {
		if c.work, err = os.MkdirTemp("/var/tmp", "fusepeer-"); err != nil {
			return err
		}
		defer os.RemoveAll(c.work)
	}
	gobtrfs := filepath.Join(c.work, "gobtrfs")
	progress("building gobtrfs")
	// Built in the main module (this one's replace points at it), whose
	// go.mod has the command's dependencies.
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gobtrfs/btrfs").Output()
	if err != nil {
		return fmt.Errorf("go list -m github.com/gobtrfs/btrfs: %w", err)
	}
	build := exec.Command("go", "build", "-o", gobtrfs, "./cmd/gobtrfs")
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build gobtrfs: %v\n%s", err, out)
	}
	tarball := ""
	if c.metadata {
		if tarball, err = goSourceTar(c.work); err != nil {
			return err
		}
	}
	var rows []row
	add := func(name string, seconds bool, target string, v float64) {
		for i := range rows {
			if rows[i].name == name {
				rows[i].r[target] = v
				return
			}
		}
		rows = append(rows, row{name: name, seconds: seconds, r: result{target: v}})
	}
	var share string
	for _, target := range c.targets {
		dir, stop, err := setUp(c, target, gobtrfs)
		if err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
		err = measure(c, target, dir, tarball, add)
		if err == nil && target == "ours" {
			share = shortcutShare(dir)
		}
		if serr := stop(); err == nil && serr != nil {
			err = fmt.Errorf("%s: tear down: %w", target, serr)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", target, err)
		}
	}
	printTable(os.Stdout, c, rows, share)
	return nil
}

// measure runs the metadata row and then sysbench in dir.
func measure(c *config, target, dir, tarball string, add func(string, bool, string, float64)) error {
	if tarball != "" {
		meta := filepath.Join(dir, "meta")
		if err := os.Mkdir(meta, 0o755); err != nil {
			return err
		}
		progress("%s: untar Go's source tree", target)
		d, err := timed(exec.Command("tar", "-xf", tarball, "-C", meta))
		if err != nil {
			return err
		}
		add("untar Go's src (s)", true, target, d.Seconds())
		progress("%s: rm -rf it", target)
		if d, err = timed(exec.Command("rm", "-rf", meta)); err != nil {
			return err
		}
		add("rm -rf Go's src (s)", true, target, d.Seconds())
	}
	if len(c.modes) == 0 || c.modes[0] == "" {
		return nil
	}
	sb := filepath.Join(dir, "sysbench")
	if err := os.Mkdir(sb, 0o755); err != nil {
		return err
	}
	for _, mode := range c.modes {
		for _, n := range c.threads {
			// seqwr starts its files anew (truncates them); prepare
			// brings them back to full size before the other modes
			// and does nothing when they are.
			if mode != "seqwr" {
				progress("%s: sysbench prepare", target)
				if _, err := sysbench(c, sb, "prepare", mode, 1); err != nil {
					return err
				}
			}
			progress("%s: sysbench %s, %d threads", target, mode, n)
			v, err := sysbench(c, sb, "run", mode, n)
			if err != nil {
				return err
			}
			add(fmt.Sprintf("%s %d threads (MiB/s)", mode, n), false, target, v)
		}
	}
	_, err := sysbench(c, sb, "cleanup", "seqwr", 1)
	return err
}

// sysbenchArgs are the fileio arguments of every run.
func sysbenchArgs(c *config, mode string, threads int) []string {
	return []string{"fileio", "--file-total-size=" + c.totalSize, "--file-num=" + strconv.Itoa(c.files),
		"--file-block-size=8192", "--file-test-mode=" + mode, "--file-fsync-freq=100",
		"--threads=" + strconv.Itoa(threads), "--time=" + strconv.Itoa(int(c.runTime/time.Second)), "--events=0"}
}

// sysbench runs one sysbench fileio step in dir and returns the MiB/s
// read and written.
func sysbench(c *config, dir, step, mode string, threads int) (float64, error) {
	cmd := exec.Command("sysbench", append(sysbenchArgs(c, mode, threads), step)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("sysbench %s %s: %v\n%s", step, mode, err, out)
	}
	if step != "run" {
		return 0, nil
	}
	var total float64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		for _, p := range []string{"read, MiB/s:", "written, MiB/s:"} {
			if v, ok := strings.CutPrefix(line, p); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return 0, fmt.Errorf("sysbench output %q: %v", line, err)
				}
				total += f
				found = true
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("sysbench printed no throughput:\n%s", out)
	}
	return total, nil
}

// timed runs cmd and returns how long it took.
func timed(cmd *exec.Cmd) (time.Duration, error) {
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return d, nil
}

// goSourceTar makes a tar of the Go toolchain's src directory.
func goSourceTar(work string) (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %w", err)
	}
	root := strings.TrimSpace(string(out))
	tarball := filepath.Join(work, "gosrc.tar")
	progress("tar of %s/src", root)
	if out, err := exec.Command("tar", "-cf", tarball, "-C", root, "src").CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar of %s/src: %v\n%s", root, err, out)
	}
	return tarball, nil
}

// setUp makes target's filesystem and mount and returns the directory to
// measure in and how to take it all down again.
func setUp(c *config, target, gobtrfs string) (dir string, stop func() error, err error) {
	var undo []func() error
	stop = func() error {
		var first error
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	defer func() {
		if err != nil {
			_ = stop()
		}
	}()
	img := filepath.Join(c.work, target+".img")
	if err := mkfs(img, c.imageSize); err != nil {
		return "", nil, err
	}
	undo = append(undo, func() error { return os.Remove(img) })
	mnt := filepath.Join(c.work, target)
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return "", nil, err
	}
	undo = append(undo, func() error { return os.Remove(mnt) })
	if target == "ours" {
		args := []string{"mount", "--stats"}
		if c.mountOpts != "" {
			args = append(args, "-o", c.mountOpts)
		}
		if c.cpuProfile != "" {
			args = append(args, "--cpuprofile", c.cpuProfile)
		}
		stopd, err := daemon(exec.Command(gobtrfs, append(args, img, mnt)...), mnt)
		if err != nil {
			return "", nil, err
		}
		undo = append(undo, stopd)
		return mnt, stop, nil
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		return "", nil, fmt.Errorf("losetup %s: %w", img, err)
	}
	loop := strings.TrimSpace(string(out))
	undo = append(undo, func() error { return exec.Command("losetup", "-d", loop).Run() })
	if err := syscall.Mount(loop, mnt, "btrfs", 0, ""); err != nil {
		return "", nil, fmt.Errorf("mount %s: %w", loop, err)
	}
	undo = append(undo, func() error { return syscall.Unmount(mnt, 0) })
	if target == "kernel" {
		return mnt, stop, nil
	}
	src := filepath.Join(mnt, "loopback-src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", nil, err
	}
	lmnt := filepath.Join(c.work, "loopback-mnt")
	if err := os.Mkdir(lmnt, 0o755); err != nil {
		return "", nil, err
	}
	undo = append(undo, func() error { return os.Remove(lmnt) })
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	stopd, err := daemon(exec.Command(self, "serve-loopback", src, lmnt), lmnt)
	if err != nil {
		return "", nil, err
	}
	undo = append(undo, stopd)
	return lmnt, stop, nil
}

// mkfs makes a sparse image of size bytes with the kernel's mkfs.btrfs.
func mkfs(img string, size int64) error {
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if out, err := exec.Command("mkfs.btrfs", "-f", "-q", img).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.btrfs %s: %v\n%s", img, err, out)
	}
	return nil
}

// daemon starts a FUSE server in the foreground of cmd, waits until mnt
// is a mount point, and returns how to unmount it and wait for the
// server to end.
func daemon(cmd *exec.Cmd, mnt string) (func() error, error) {
	var stderr bytes.Buffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	before, err := devOf(mnt)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("%s ended before mounting: %v\n%s", cmd.Args[0], err, stderr.String())
		default:
		}
		if d, err := devOf(mnt); err == nil && d != before {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("%s: %s not mounted after 30s\n%s", cmd.Args[0], mnt, stderr.String())
		}
	}
	return func() error {
		var err error
		for range 100 {
			if err = exec.Command("fusermount3", "-u", mnt).Run(); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		if werr := <-exited; werr != nil {
			return fmt.Errorf("%s: %v\n%s", cmd.Args[0], werr, stderr.String())
		}
		return err
	}, nil
}

// devOf is the device number of the filesystem holding p.
func devOf(p string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, err
	}
	return uint64(st.Dev), nil
}

// shortcutShare reads our mount's write counters and says what share of
// push_leaf_right calls took the shortcut, over all trees.
func shortcutShare(mnt string) string {
	data, err := os.ReadFile(filepath.Join(mnt, ".gobtrfs", "counters"))
	if err != nil {
		return "unread: " + err.Error()
	}
	var wc btrfs.WriteCounters
	if err := json.Unmarshal(data, &wc); err != nil {
		return "unread: " + err.Error()
	}
	t := wc.Total()
	return fmt.Sprintf("%.1f%% of %d push_leaf_right calls (%d commits)", 100*t.ShortcutShare(), t.PushLeafRight, wc.Commits)
}

// printTable writes the figures as Markdown, with the ratios of ours to
// each peer as speeds (for times: the peer's time over ours), so above 1
// is faster than the peer either way.
func printTable(w io.Writer, c *config, rows []row, share string) {
	fmt.Fprintf(w, "fusepeer: %s, %d CPUs, Go %s; sysbench %s, %d files, 8 KiB blocks, fsync every 100, %s per run\n\n",
		kernelRelease(), runtime.NumCPU(), runtime.Version(), c.totalSize, c.files, c.runTime)
	fmt.Fprintln(w, "| row | gobtrfs mount | loopback | kernel btrfs | ours/loopback | ours/kernel |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		cell := func(t string) string {
			v, ok := r.r[t]
			if !ok {
				return "-"
			}
			if r.seconds {
				return fmt.Sprintf("%.2f", v)
			}
			return fmt.Sprintf("%.1f", v)
		}
		ratio := func(peer string) string {
			o, ok1 := r.r["ours"]
			p, ok2 := r.r[peer]
			if !ok1 || !ok2 || o == 0 || p == 0 {
				return "-"
			}
			if r.seconds {
				return fmt.Sprintf("%.2fx", p/o)
			}
			return fmt.Sprintf("%.2fx", o/p)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.name, cell("ours"), cell("loopback"), cell("kernel"), ratio("loopback"), ratio("kernel"))
	}
	if share != "" {
		fmt.Fprintf(w, "\nshortcut share on our mount: %s\n", share)
	}
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "linux"
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return "Linux " + b.String()
}

// progress reports a step on standard error.
func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}
