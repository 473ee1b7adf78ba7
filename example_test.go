package btrfs_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/mkfs"
)

// exampleImage formats a fresh 128 MiB image in a temporary directory, as
// a program would with mkfs.Format; no root and no loop device needed.
func exampleImage() (img string, cleanup func()) {
	dir, err := os.MkdirTemp("", "gobtrfs-example-")
	if err != nil {
		log.Fatal(err)
	}
	img = filepath.Join(dir, "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 128 << 20, Label: "example"}); err != nil {
		log.Fatal(err)
	}
	return img, func() { os.RemoveAll(dir) }
}

// Open gives a read-only io/fs.FS; changes are refused with EROFS.
func ExampleOpen() {
	img, cleanup := exampleImage()
	defer cleanup()

	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer fsys.Close()
	entries, err := fsys.ReadDir(".")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("label:", fsys.Label())
	fmt.Println("entries:", len(entries))
	err = fsys.Mkdir("new", 0o755)
	fmt.Println("read-only:", errors.Is(err, syscall.EROFS))
	// Output:
	// label: example
	// entries: 0
	// read-only: true
}

// OpenWritable takes changes into a transaction; Commit makes them
// durable, and any later Open sees them.
func ExampleOpenWritable() {
	img, cleanup := exampleImage()
	defer cleanup()

	fsys, err := btrfs.OpenWritable(img, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := fsys.Mkdir("etc", 0o755); err != nil {
		log.Fatal(err)
	}
	if err := fsys.WriteFile("etc/hostname", []byte("gobtrfs\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := fsys.Commit(); err != nil {
		log.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		log.Fatal(err)
	}

	ro, err := btrfs.Open(img, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ro.Close()
	data, err := ro.ReadFile("etc/hostname")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", data)
	// Output: "gobtrfs\n"
}
