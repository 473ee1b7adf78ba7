// Command fusepeer measures `gobtrfs mount` against its two peers, as
// issue 11 asks: go-fuse's loopback filesystem (the example's settings)
// over a directory of the kernel's btrfs, the ceiling for any Go FUSE
// filesystem, and the kernel's btrfs itself. It runs sysbench fileio
// (seqwr, rndwr, seqrd, rndrd; 16 and 512 threads; 8 KiB blocks; an
// fsync every 100 requests) and a metadata row (untar Go's source tree,
// then rm -rf it) on each, and prints a Markdown table of MiB/s and
// seconds with the ratios ours/loopback and ours/kernel.
//
// It is a module of its own (see go.mod) and needs root, /dev/fuse,
// fusermount3, loop devices, mkfs.btrfs, sysbench, tar and a Go
// toolchain (it builds cmd/gobtrfs from this checkout):
//
//	cd bench/fusepeer && go run . [flags]
//
// With -targets ours -cpuprofile FILE it profiles our daemon over the
// chosen rows (gobtrfs mount --cpuprofile).
//
// The loopback server is this program too, run again as
// `fusepeer serve-loopback SRC MNT`, so that it is a process of its own
// like `gobtrfs mount`.
package main
