//go:build linux

package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/fuse"
)

// readyFDEnv names the descriptor on which a --background child reports
// that its mount is ready ("ok") or why it failed.
const readyFDEnv = "GOBTRFS_MOUNT_READY_FD"

func newMountCommand() *cobra.Command {
	var (
		ff         fsFlags
		options    []string
		background bool
		debug      bool
		stats      bool
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "mount [-o OPTIONS] [-d DEVICE]... IMAGE|DEVICE MOUNTPOINT",
		Short: "Mount a filesystem image through FUSE, read-only or read-write",
		Long: `Mount shows the filesystem in IMAGE (or on a block device) at MOUNTPOINT
through FUSE, without the kernel's btrfs and without loop devices, and
serves it until it is unmounted (umount, fusermount3 -u) or gets SIGINT or
SIGTERM, which unmount it; changes are committed then, every commit=
seconds, and on fsync. With --background it returns once the mount is
ready and serves it from a detached process.

Options (-o, comma separated, btrfs(5) names): ro, rw, subvol=PATH,
subvolid=N, compress=zlib|lzo|zstd[:LEVEL], compress-force=...,
commit=SECONDS, nodatasum, nodatacow, noatime, relatime, max_inline=N;
FUSE's allow_other and default_permissions. ro opens the image read-only,
which also works for images whose features gobtrfs cannot write.

SIGUSR1 prints the write counters (commits, bytes, per-tree B-tree
counters) as JSON to standard error (in the foreground); with --stats they
also read from MOUNTPOINT/.gobtrfs/counters, a directory no listing shows.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			bo, mo, err := fuse.ParseOptions(strings.Join(options, ","))
			if err != nil {
				return usageError{err}
			}
			mo.Debug = mo.Debug || debug
			mo.Stats = stats
			if background && os.Getenv(readyFDEnv) == "" {
				return mountBackground(cmd)
			}
			return runMount(cmd, args[0], args[1], &ff, bo, mo, cpuProfile)
		},
	}
	ff.register(cmd)
	cmd.Flags().StringArrayVarP(&options, "options", "o", nil, "mount options, comma separated (repeatable)")
	cmd.Flags().BoolVar(&background, "background", false, "return once mounted and serve from a detached process")
	cmd.Flags().BoolVar(&debug, "debug", false, "log every FUSE request to standard error")
	cmd.Flags().BoolVar(&stats, "stats", false, "add MOUNTPOINT/.gobtrfs/counters (hidden): the write counters as JSON")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the daemon, from mount to unmount, to this file (for go tool pprof)")
	return cmd
}

// runMount mounts and serves until unmounted, with a CPU profile written
// to cpuProfile unless it is "".
func runMount(cmd *cobra.Command, image, dir string, ff *fsFlags, bo *btrfs.Options, mo *fuse.Options, cpuProfile string) (err error) {
	ready := readyPipe()
	defer func() {
		if ready != nil {
			// A --background child that failed before the mount was
			// ready: the waiting parent shows the error and exits 1;
			// this detached process ends without a word of its own.
			fmt.Fprintf(ready, "%v\n", err)
			ready.Close()
			os.Exit(ExitFailure)
		}
	}()
	// Say what is wrong with the mount point in stat's words, before
	// fusermount3 says it in its own.
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return &os.PathError{Op: "mount", Path: dir, Err: syscall.ENOTDIR}
	}
	bo.Devices = ff.devices
	bo.SuperFallback = ff.superFallback
	fsys, err := openImage(image, bo, !mo.ReadOnly, warner(cmd))
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	if mo.Debug {
		mo.Logger = log.New(stderr, "fuse: ", log.Lmicroseconds)
	}
	if cpuProfile != "" {
		stop, err := startCPUProfile(cpuProfile)
		if err != nil {
			fsys.Close()
			return err
		}
		defer stop()
	}
	// The signals are caught before the mount appears: a SIGTERM sent as
	// soon as the mount is seen (as a script or test does) unmounts and
	// commits instead of killing the daemon with the mount left behind.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	srv, err := fuse.Mount(dir, fsys, mo)
	if err != nil {
		fsys.Close()
		return err
	}
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
		ready = nil
	}
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			// Unmounted: Close commits what is left.
			if err := fsys.Close(); err != nil {
				return fmt.Errorf("%s: commit at unmount: %w", image, err)
			}
			return nil
		case s := <-sigs:
			if s == syscall.SIGUSR1 {
				printCounters(stderr, fsys)
				continue
			}
			if err := srv.Unmount(); err != nil {
				fmt.Fprintf(stderr, "%s: unmount %s: %v (still mounted)\n", cmd.CommandPath(), dir, err)
			}
		}
	}
}

// printCounters writes the write counters as one JSON line.
func printCounters(w io.Writer, fsys *btrfs.FS) {
	c, err := fsys.WriteCounters()
	if err != nil {
		fmt.Fprintf(w, "counters: %v\n", err)
		return
	}
	b, _ := json.Marshal(c)
	fmt.Fprintf(w, "%s\n", b)
}

// readyPipe is the --background child's end of the readiness pipe, or nil.
func readyPipe() *os.File {
	s := os.Getenv(readyFDEnv)
	if s == "" {
		return nil
	}
	os.Unsetenv(readyFDEnv)
	fd, err := strconv.Atoi(s)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "ready")
}

// mountBackground starts this command again in a new session with the
// readiness pipe and waits for its word: the mount is ready, or why not.
func mountBackground(cmd *cobra.Command) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	child := exec.Command(exe, os.Args[1:]...)
	child.Env = append(os.Environ(), readyFDEnv+"=3")
	child.ExtraFiles = []*os.File{w}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if line == "ok" {
		return child.Process.Release()
	}
	_ = child.Wait()
	if line == "" {
		line = "the mount process ended before the mount was ready"
	}
	return errors.New(line)
}
