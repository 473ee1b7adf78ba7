package check_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gobtrfs/btrfs/check"
	"github.com/gobtrfs/btrfs/mkfs"
)

// Run checks an image and says whether it is clean; problems are data in
// the Report, an error means the check could not run.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "check-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "fs.img")
	if err := mkfs.Format(img, mkfs.Options{Size: 128 << 20}); err != nil {
		log.Fatal(err)
	}
	rep, err := check.Run(context.Background(), []string{img}, check.Options{DataCsum: true})
	if err != nil {
		log.Fatal(err) // btrfs check's exit status 2
	}
	for _, p := range rep.Problems {
		fmt.Println(p.Kind, p.Message)
	}
	fmt.Println("clean:", rep.Clean())
	// Output: clean: true
}
