package btrfs

// Sync makes every change durable, as fsync of any file would.
//
// Stand-in until the live FS lands (group commit: concurrent Syncs share
// one commit); it will be replaced at merge.
func (fsys *FS) Sync() error { return fsys.Commit() }
