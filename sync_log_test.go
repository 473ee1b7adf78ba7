package btrfs_test

import (
	"path/filepath"
	"testing"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/mkfs"
)

// TestTreeLogFallsBack: File.Sync goes through the tree log only when the
// transaction holds plain data writes to files of the last commit, and
// the chunks are those of the last commit; anything else commits, and
// NoTreeLog always commits.
func TestTreeLogFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   btrfs.Options
		before func(fsys *btrfs.FS) error // run after the write, before the Sync
		logged bool
	}{
		{name: "plain write", logged: true},
		{name: "notreelog", opts: btrfs.Options{NoTreeLog: true}},
		{name: "create", before: func(fsys *btrfs.FS) error { return fsys.WriteFile("new", []byte("x"), 0o644) }},
		{name: "rename", before: func(fsys *btrfs.FS) error { return fsys.Rename("other", "other2") }},
		{name: "link", before: func(fsys *btrfs.FS) error { return fsys.Link("other", "other2") }},
		{name: "truncate", before: func(fsys *btrfs.FS) error { return fsys.Truncate("f", 10) }},
		{name: "xattr", before: func(fsys *btrfs.FS) error { return fsys.Setxattr("f", "user.a", []byte("b")) }},
		{name: "new data chunk", before: func(fsys *btrfs.FS) error {
			_, err := fsys.WriteAt("other", make([]byte, 96<<20), 0)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "img")
			if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20}); err != nil {
				t.Fatal(err)
			}
			opts := tc.opts
			opts.CommitInterval = -1
			fsys, err := btrfs.OpenWritable(img, &opts)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			for _, n := range []string{"f", "other"} {
				if err := fsys.WriteFile(n, make([]byte, 100000), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := fsys.Commit(); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.OpenFile("f")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("hello"), 5000); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				if err := tc.before(fsys); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := fsys.WriteCounters()
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			after, _ := fsys.WriteCounters()
			logs, commits := after.LogSyncs-before.LogSyncs, after.Commits-before.Commits
			if tc.logged && (logs != 1 || commits != 0) || !tc.logged && (logs != 0 || commits != 1) {
				t.Fatalf("Sync: %d log syncs and %d commits; want logged=%v", logs, commits, tc.logged)
			}
			// A second Sync with nothing new costs nothing.
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			again, _ := fsys.WriteCounters()
			if again.LogSyncs != after.LogSyncs || again.Commits != after.Commits {
				t.Fatalf("a Sync without changes wrote: %+v then %+v", after, again)
			}
		})
	}
}
