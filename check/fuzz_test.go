package check

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gobtrfs/btrfs/internal/ctree"
	"github.com/gobtrfs/btrfs/internal/disk"
)

// FuzzCheck damages tree blocks of a small image, with and without
// recomputing their checksums (so the damage reaches the item checks),
// and runs the checker: it must report problems or fail with an error,
// never panic or hang.
func FuzzCheck(f *testing.F) {
	img := makeImage(f)
	c := openChecker(f, img)
	// Every tree block, by logical address, to aim the damage at.
	var blocks []disk.LogicalAddr
	for _, t := range c.trees {
		ctree.Walk(c, t.root, func(n disk.Node, _ int) error {
			blocks = append(blocks, n.Bytenr())
			return nil
		})
	}
	if len(blocks) == 0 {
		f.Fatal("no tree blocks")
	}
	nodesize := c.params.NodeSize
	orig := map[disk.LogicalAddr][]byte{}
	for _, a := range blocks {
		n, err := c.ReadBlock(a, disk.Expect{Bytenr: a, Level: -1})
		if err != nil {
			f.Fatal(err)
		}
		orig[a] = append([]byte(nil), n...)
	}
	f.Add([]byte{1, 0, 0x65, 0, 0xff})
	f.Add([]byte{1, 3, 0x70, 0, 0x01, 5, 0x80, 0, 0x10})
	f.Add([]byte{0, 1, 0x20, 0, 0x01})
	f.Add([]byte{1, 2, 0x60, 0, 0x7f, 2, 0x61, 0, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 5 {
			return
		}
		resum := data[0]&1 != 0
		touched := map[disk.LogicalAddr][]byte{}
		for ops := data[1:]; len(ops) >= 4 && len(touched) < 16; ops = ops[4:] {
			a := blocks[int(ops[0])%len(blocks)]
			b := touched[a]
			if b == nil {
				b = append([]byte(nil), orig[a]...)
				touched[a] = b
			}
			off := (int(ops[1]) | int(ops[2])<<8) % nodesize
			if off < disk.CsumFieldSize {
				off += disk.CsumFieldSize
			}
			b[off] ^= ops[3]
		}
		for a, b := range touched {
			writeBlockAt(t, c, img, a, disk.Node(b), resum)
		}
		defer func() {
			for a := range touched {
				writeBlockAt(t, c, img, a, disk.Node(append([]byte(nil), orig[a]...)), false)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := Run(ctx, []string{img}, Options{MemoryLimit: 16 << 20})
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("check hung")
		}
	})
}

// TestFuzzImageRestored guards the fuzz harness: the image it damages is
// clean again after each input, so every input starts from a good image.
func TestFuzzImageRestored(t *testing.T) {
	img := makeImage(t)
	before, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if rep := runCheck(t, img, false); !rep.Clean() || before.Size() == 0 {
		t.Fatalf("base image not clean:\n%s", problemsText(rep))
	}
}
