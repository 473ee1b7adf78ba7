// Command gobtrfs reads, writes, creates, checks and mounts btrfs
// filesystems in image files and block devices, without root and without
// the kernel. See internal/cli for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"

	"github.com/gobtrfs/btrfs/internal/cli"
)

// gcPercent is the garbage collector's target unless GOGC says otherwise.
// The commands are short batch jobs whose heap holds little that lives
// long (buffers, per-transaction caches): a higher target spends less
// CPU on collections that free little, for a heap at most a few times
// larger (about 10% faster image builds measured, docs/benchmarks.md).
const gcPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	// Ctrl-C cancels long work (mkfs, cp, extract) between steps, so
	// what was committed stays consistent.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// Started as mkfs.btrfs (a symlink), it is `gobtrfs mkfs`.
	code := cli.MainContext(ctx, cli.Args(os.Args), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
