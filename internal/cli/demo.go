package cli

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
	"github.com/spf13/cobra"

	"github.com/gobtrfs/btrfs"
	"github.com/gobtrfs/btrfs/internal/extract"
)

// demoImage is a small filesystem made by mkfs.btrfs --rootdir (a copy of
// testdata/images/rootdir-16k-crc32c.img.zst; see testdata/images/gen.sh).
//
//go:embed demo.img.zst
var demoImage []byte

func newDemoCommand() *cobra.Command {
	var keep string
	cmd := &cobra.Command{
		Use:   "demo [--out DIR]",
		Short: "List and extract a small btrfs image built into gobtrfs",
		Long: `Unpack a small btrfs image made by mkfs.btrfs (it is built into the binary),
list it recursively, extract it, and say where. The image stays in a new
temporary directory for more commands (the demo names it). Shows what gobtrfs
does with nothing but Go installed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd.OutOrStdout(), keep) },
	}
	cmd.Flags().StringVar(&keep, "out", "", "extract into DIR (default: a new temporary directory)")
	return cmd
}

func runDemo(w io.Writer, out string) error {
	tmp, err := os.MkdirTemp("", "gobtrfs-demo-")
	if err != nil {
		return err
	}
	img := filepath.Join(tmp, "demo.img")
	// The image stays: the demo shows commands to try on it.
	if err := unpackSparse(img, demoImage); err != nil {
		return err
	}
	fmt.Fprintf(w, "$ gobtrfs ls -lR %s\n", img)
	ls := &lsCmd{long: true, recursive: true, all: true}
	if err := ls.run(w, []string{img}); err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(tmp, "extracted")
	}
	fsys, err := btrfs.Open(img, nil)
	if err != nil {
		return err
	}
	defer fsys.Close()
	st, err := extract.Run(bgContext(), fsys, ".", out, extract.Options{})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n$ gobtrfs extract %s %s\n", img, out)
	fmt.Fprintf(w, "extracted %d files (%d bytes), %d directories, %d symlinks, %d hardlinks, %d special files into %s\n",
		st.Files, st.Bytes, st.Dirs, st.Symlinks, st.Hardlinks, st.Special, out)
	fmt.Fprintf(w, "\nThe image is kept for you to try more:\n  gobtrfs cat %s:/regular\n  gobtrfs mkdir %s:/new\n  gobtrfs ls -l %s\nRemove %s when done.\n",
		img, img, img, tmp)
	return nil
}

// unpackSparse decompresses a zstd image into path, leaving all-zero blocks
// as holes so a 100 MiB image costs only what it holds.
func unpackSparse(path string, zst []byte) error {
	dec, err := zstd.NewReader(bytes.NewReader(zst))
	if err != nil {
		return err
	}
	defer dec.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, rerr := io.ReadFull(dec, buf)
		if n > 0 && !allZero(buf[:n]) {
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				f.Close()
				return err
			}
		}
		off += int64(n)
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			f.Close()
			return rerr
		}
	}
	if err := f.Truncate(off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
