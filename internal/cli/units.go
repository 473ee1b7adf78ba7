package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

// Sizes as btrfs-progs prints them (pretty_size_mode): "%.2f" and a
// suffix, the fraction computed in C float, or raw bytes.

// unitFlags are progs' unit options of filesystem show, df and du.
type unitFlags struct {
	raw, human, iec, si     bool
	kb, mb, gb, tb, humanSI bool
}

func (u *unitFlags) register(cmd *cobra.Command, shortH bool) {
	f := cmd.Flags()
	// df's progs shorthands: -b raw, -h human, -H human decimal, -k -m
	// -g -t fixed units; show and du have none (show's -m is --mounted).
	short := func(s string) string {
		if shortH {
			return s
		}
		return ""
	}
	f.BoolVarP(&u.raw, "raw", short("b"), false, "print sizes in bytes")
	f.BoolVarP(&u.human, "human-readable", short("h"), false, "print sizes in powers of 1024 with a suffix (the default)")
	f.BoolVar(&u.iec, "iec", false, "use 1024 as the base (KiB, MiB, ...)")
	f.BoolVar(&u.si, "si", false, "use 1000 as the base (kB, MB, ...)")
	f.BoolVarP(&u.kb, "kbytes", short("k"), false, "print sizes in KiB (or kB with --si)")
	f.BoolVarP(&u.mb, "mbytes", short("m"), false, "print sizes in MiB (or MB with --si)")
	f.BoolVarP(&u.gb, "gbytes", short("g"), false, "print sizes in GiB (or GB with --si)")
	f.BoolVarP(&u.tb, "tbytes", short("t"), false, "print sizes in TiB (or TB with --si)")
	if shortH {
		// -h is progs' --human-readable here: --help keeps only its
		// long form.
		f.Bool("help", false, "help for "+cmd.Name())
		f.BoolVarP(&u.humanSI, "human-si", "H", false, "print sizes in powers of 1000 with a suffix")
	}
}

// format prints n in the chosen unit.
func (u *unitFlags) format(n uint64) string {
	if u.raw {
		return strconv.FormatUint(n, 10)
	}
	base := uint64(1024)
	suffix := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if u.si || u.humanSI {
		base = 1000
		suffix = []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	}
	fixed := -1
	switch {
	case u.kb:
		fixed = 1
	case u.mb:
		fixed = 2
	case u.gb:
		fixed = 3
	case u.tb:
		fixed = 4
	}
	if fixed >= 0 {
		div := uint64(1)
		for i := 0; i < fixed; i++ {
			div *= base
		}
		return fmt.Sprintf("%.2f%s", float64(float32(n)/float32(div)), suffix[fixed])
	}
	divs, last := 0, n
	for n >= base {
		last = n
		n /= base
		divs++
	}
	if divs == 0 {
		return fmt.Sprintf("%.2f%s", float64(float32(last)), suffix[0])
	}
	return fmt.Sprintf("%.2f%s", float64(float32(last)/float32(base)), suffix[divs])
}
