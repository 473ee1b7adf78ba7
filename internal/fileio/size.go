package fileio

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a size as sysbench does: a number of bytes with an
// optional suffix K, M, G or T (powers of 1024, either case; a trailing
// "B" or "iB" is accepted too, so 8K, 8k, 8KB and 8KiB are all 8192).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "IB"), "B")
	shift := 0
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
		if shift != 0 {
			u = u[:n-1]
		}
	}
	v, err := strconv.ParseInt(u, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional K, M, G or T suffix", s)
	}
	if v > (1<<63-1)>>shift {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return v << shift, nil
}

// FormatSize prints n the way ParseSize reads it, in the largest unit
// that divides it (8K, 1G, 1000).
func FormatSize(n int64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}
