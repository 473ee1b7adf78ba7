package mkfs_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/mkfs"
)

// Format makes an empty filesystem in an image file (created sparse),
// which btrfs.Open and the kernel both read.
func ExampleFormat() {
	dir, err := os.MkdirTemp("", "gobtrfs-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "fs.img")

	uuid, err := btrfs.ParseUUID("0b7e5e0a-6f1c-4d2e-9a3b-5c4d3e2f1a0b")
	if err != nil {
		log.Fatal(err)
	}
	err = mkfs.Format(img, mkfs.Options{Size: 128 << 20, Label: "data", UUID: uuid, Csum: btrfs.CsumXXHash})
	if err != nil {
		log.Fatal(err)
	}

	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer fsys.Close()
	info, err := fsys.Info()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Label, info.UUID, info.Checksum)
	// Output: data 0b7e5e0a-6f1c-4d2e-9a3b-5c4d3e2f1a0b xxhash64
}
