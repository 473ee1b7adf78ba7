package btrfs

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gobtrfs/btrfs/internal/btrfstest"
	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// imageHash is the SHA-256 of the whole image file.
func imageHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestOpenWritableDamageFoundWhenMet is issue 12 §5's contract: an open
// for writing does not read the whole filesystem, so damage in a tree
// block it does not read does not stop it; a change that reads the
// damaged block fails with ErrCorrupt naming the tree and block, and
// leaves the image as the last commit left it; a change that does not
// read it commits.
func TestOpenWritableDamageFoundWhenMet(t *testing.T) {
	btrfstest.RequireInterop(t)
	img := btrfstest.Mkfs(t, btrfstest.MkfsOptions{MetadataProfile: "dup"})
	w, err := OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "b"} {
		if err := w.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 600 {
			if err := w.CreateEmpty(fmt.Sprintf("%s/f%d", d, i), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// The leaf holding b's first DIR_INDEX items: in the middle of the fs
	// tree, neither its first leaf (the top directory) nor its last (the
	// highest inode number).
	r, err := Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.walk("test", "b", false)
	if err != nil {
		t.Fatal(err)
	}
	c := ctree.NewCursor(r.br, r.top.root)
	if ok, err := c.Seek(disk.Key{ObjectID: b.ino, Type: disk.DirIndexKey}); !ok || err != nil {
		t.Fatalf("seek b's DIR_INDEX: %v %v", ok, err)
	}
	leaf := c.Leaf().Bytenr()
	if leaf == r.top.root.Addr {
		t.Fatal("the fs tree is one leaf: nothing to damage apart from its root")
	}
	offs := physical(t, r, leaf)
	r.Close()
	if len(offs) != 2 {
		t.Fatalf("leaf has %d copies, want 2 (DUP)", len(offs))
	}
	for _, off := range offs {
		xorAt(t, img, off+200)
	}

	before := imageHash(t, img)
	w, err = OpenWritable(img, nil)
	if err != nil {
		t.Fatalf("open for writing with damage it does not read: %v", err)
	}
	err = w.Remove("b/f0") // deletes b's DIR_INDEX 2, in the damaged leaf
	if err == nil {
		w.Close()
		t.Fatal("a change through the damaged leaf succeeded")
	}
	t.Logf("refused: %v", err)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("error does not wrap ErrCorrupt: %v", err)
	}
	for _, want := range []string{"FS_TREE", strconv.FormatUint(uint64(leaf), 10)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	w.Close() // the refused change's transaction is dropped: nothing to commit
	if imageHash(t, img) != before {
		t.Fatal("a refused change changed the image")
	}

	// A change that does not read the damaged leaf commits.
	w, err = OpenWritable(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Mkdir("c", 0o755); err != nil {
		t.Fatalf("a change away from the damage: %v", err)
	}
	if err := w.CreateEmpty("a/new", 0o644); err != nil {
		t.Fatalf("a change away from the damage: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, p := range []string{"c", "a/new", "a/f599"} {
		if _, err := r.Stat(p); err != nil {
			t.Errorf("stat %s after the commit: %v", p, err)
		}
	}
	if _, err := r.ReadDir("b"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("reading the damaged directory: %v, want ErrCorrupt", err)
	}
}
