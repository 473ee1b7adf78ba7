package txn_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/disk"
	"github.com/gobtrfs/btrfs/internal/txn"
)

// TestConcurrentInserts has several goroutines insert into the fs tree in
// one transaction (the engine allows it, so the Store must be safe for
// it); run with -race.
func TestConcurrentInserts(t *testing.T) {
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{NodeSize: 4096})
	const workers, each = 4, 100
	want := map[string][]byte{}
	hashes := map[uint64]bool{}
	names := make([][]string, workers)
	for w := 0; w < workers; w++ {
		for i := 0; len(names[w]) < each; i++ {
			name := fmt.Sprintf("user.w%d.%d", w, i)
			h := disk.NameHash([]byte(name))
			if hashes[h] {
				continue
			}
			hashes[h] = true
			names[w] = append(names[w], name)
			want[name] = []byte(name + "=value")
		}
	}
	fs, err := txn.Open([]string{img})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := fs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fsTree, err := tx.Tree(disk.FSTreeObjectID)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for _, name := range names[w] {
				d := disk.DirItems{{TransID: tx.Generation(), Type: disk.FtXattr, Name: []byte(name), Data: want[name]}}
				buf := make([]byte, d.Size())
				d.Encode(buf)
				key := disk.Key{ObjectID: disk.FirstFreeInode, Type: disk.XattrItemKey, Offset: disk.NameHash([]byte(name))}
				if err := fsTree.InsertItem(tx.Trans(), key, buf); err != nil {
					errs[w] = err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	touchTop(t, tx, fsTree)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	btrfstest.Check(t, []string{img}, false)
	checkXattrs(t, img, want)
}
