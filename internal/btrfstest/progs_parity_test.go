package btrfstest

import (
	"slices"
	"testing"
)

// A failed btrfs check of a RAID5 set from a CI run (2026-12-05): only
// the rebuilt copies mismatched.
const progsParityOutput = `btrfs check --readonly --check-data-csum /dev/loop0: exit status 1
[1/7] checking root items
[2/7] checking extents
[3/7] checking free space tree
[4/7] checking fs roots
[5/7] checking csums against data
mirror 2 bytenr 105971712 csum 0x041034f7 expected csum 0x4502371c
mirror 2 bytenr 105975808 csum 0xedc312ba expected csum 0x79037d9e
ERROR: errors found in csum tree
[6/7] checking root refs
[7/7] checking quota groups skipped (not enabled on this FS)
Opening filesystem to check...
Checking filesystem on /dev/loop0
UUID: d77c79cb-5c4c-4da9-a792-d888d1ebbce7
found 1728512 bytes used, error(s) found
total csum bytes: 840
total tree bytes: 147456
total fs tree bytes: 32768
total extent tree bytes: 16384
btree space waste bytes: 133200
file data blocks allocated: 1806336
 referenced 1290240
`

func TestProgsParityMismatches(t *testing.T) {
	got, ok := progsParityMismatches(progsParityOutput)
	if !ok || !slices.Equal(got, []uint64{105971712, 105975808}) {
		t.Fatalf("got %v, %v", got, ok)
	}
	// Another process's loop device going away during the scan is noise.
	if got, ok := progsParityMismatches("ERROR: cannot scan /dev/loop3: Input/output error\n" + progsParityOutput); !ok || len(got) != 2 {
		t.Fatalf("with scan noise: got %v, %v", got, ok)
	}
	for name, out := range map[string]string{
		"first mirror": progsParityOutput + "mirror 1 bytenr 4096 csum 0x1 expected csum 0x2\n",
		"other error":  progsParityOutput + "ERROR: root 5 inode 257 errors 400, nbytes wrong\n",
		"other finding": "[4/7] checking fs roots\nroot 5 inode 258 errors 2001, no inode item, link count wrong\n" +
			"mirror 2 bytenr 4096 csum 0x1 expected csum 0x2\n",
		"nothing": "[1/7] checking root items\nERROR: errors found in csum tree\n",
	} {
		if b, ok := progsParityMismatches(out); ok {
			t.Errorf("%s: taken for a parity false alarm (%v)", name, b)
		}
	}
}
