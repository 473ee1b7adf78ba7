package btrfs

// Options tune Open. The zero value opens the filesystem read-only with
// default cache sizes, using the primary superblock as the kernel does.
type Options struct {
	// Devices are the other devices of a multi-device filesystem, in any
	// order; they are matched by fsid and devid.
	Devices []string
	// CacheBytes bounds the metadata block cache; 0 means 64 MiB.
	CacheBytes int64
	// NoDataChecksums skips data checksum verification (for salvage). Tree
	// blocks are always verified.
	NoDataChecksums bool
	// SuperFallback mounts from the best mirror superblock of a device
	// whose primary copy is damaged, as btrfs-progs can; the kernel uses
	// only the primary.
	SuperFallback bool
}

func (o *Options) cacheBytes() int64 {
	if o.CacheBytes > 0 {
		return o.CacheBytes
	}
	return 64 << 20
}
