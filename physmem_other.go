//go:build !linux

package btrfs

// physicalMemory is the machine's RAM in bytes; off Linux it is not
// asked, and the dirty limit takes a fixed default that suits small
// machines (2.5 GiB of memory gives a 256 MiB limit).
func physicalMemory() uint64 { return 2560 << 20 }
