// Command gobtrfs reads, writes, creates, checks and mounts btrfs
// filesystems in image files and block devices, without root and without
// the kernel. See internal/cli for the commands.
package main

import (
	"os"

	"github.com/gobtrfs/btrfs/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
