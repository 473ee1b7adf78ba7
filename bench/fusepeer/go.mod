// A module of its own so that users of github.com/gobtrfs/btrfs never
// build or download what only this benchmark needs, and so that the main
// module's `go test ./...` and CI never run it (it needs root, FUSE,
// loop devices, sysbench and minutes).
module github.com/gobtrfs/btrfs/bench/fusepeer

go 1.26.0

require (
	github.com/gobtrfs/btrfs v0.0.0
	github.com/hanwen/go-fuse/v2 v2.12.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/gobtrfs/btrfs => ../..
