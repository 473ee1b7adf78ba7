package btrfs

// OpenWritableWith exposes openWritableWith to the external tests: the
// power-loss tests open an image with a recording device under the
// transaction side (write_crash_test.go).
var OpenWritableWith = openWritableWith

// SetPreparedHook makes f run in every commit's critical section, after
// its Prepare, with the commit's generation: the live power-loss test
// learns there which changes each commit holds. Set it before the first
// change.
func SetPreparedHook(fsys *FS, f func(gen uint64)) {
	fsys.w.mu.Lock()
	defer fsys.w.mu.Unlock()
	fsys.w.prepared = f
}

// SetRmdirSubvolHook makes f run each time Remove of a subvolume has
// found it empty and deletable, before it deletes it: the race test
// widens the window there. Set it before the first change.
func SetRmdirSubvolHook(fsys *FS, f func()) {
	fsys.w.mu.Lock()
	defer fsys.w.mu.Unlock()
	fsys.w.rmdirHook = f
}
