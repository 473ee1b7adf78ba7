package btrfs

import "golang.org/x/sys/unix"

// physicalMemory is the machine's RAM in bytes (0 if unknown).
func physicalMemory() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
