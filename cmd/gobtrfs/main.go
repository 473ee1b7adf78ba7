// Command gobtrfs reads, writes, creates, checks and mounts btrfs
// filesystems in image files and block devices, without root and without
// the kernel. See internal/cli for the commands.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/gobtrfs/btrfs/internal/cli"
)

func main() {
	// Ctrl-C cancels long work (mkfs, cp, extract) between steps, so
	// what was committed stays consistent.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.MainContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
