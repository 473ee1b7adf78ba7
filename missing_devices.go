package btrfs

// MissingDevices returns the ids of the devices that chunks of the
// filesystem use but that were not given when it was opened, ascending:
// reads that need them fall back to other copies or parity, or fail with
// ErrMissingDevice. Empty for a complete device set.
func (fsys *FS) MissingDevices() []uint64 {
	var out []uint64
	for _, id := range fsys.chunks.DevIDs() {
		if _, ok := fsys.devPaths[id]; !ok {
			out = append(out, uint64(id))
		}
	}
	return out
}
