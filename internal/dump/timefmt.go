package dump

import (
	"fmt"
	"time"
)

// timespecString prints a btrfs_timespec as progs does:
// "<sec>.<nsec> (YYYY-MM-DD HH:MM:SS)" with the seconds unsigned and the
// date in loc (progs uses localtime). The date follows C's strftime: the
// year is not padded and, like glibc's struct tm, wraps as a 32-bit int.
func timespecString(sec uint64, nsec uint32, loc *time.Location) string {
	return fmt.Sprintf("%d.%d (%s)", sec, nsec, civilString(int64(sec), loc))
}

// civilString formats seconds since the epoch as local date and time. The
// calendar arithmetic is done here rather than by package time so that the
// whole int64 range works.
func civilString(t int64, loc *time.Location) string {
	if loc == nil {
		loc = time.Local
	}
	if loc != time.UTC {
		_, off := time.Unix(t, 0).In(loc).Zone()
		t += int64(off)
	}
	days, rem := floorDiv(t, 86400)
	y, m, d := civilFromDays(days)
	// glibc keeps tm_year = year-1900 in an int and strftime adds 1900
	// back as an int: both wrap.
	year := int32(int32(y-1900) + 1900)
	return fmt.Sprintf("%d-%02d-%02d %02d:%02d:%02d", year, m, d, rem/3600, rem%3600/60, rem%60)
}

// floorDiv returns the floored quotient and the non-negative remainder.
func floorDiv(a, b int64) (int64, int64) {
	q, r := a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

// civilFromDays converts days since 1970-01-01 to a proleptic Gregorian
// date (the well-known era-based algorithm: 400-year eras of 146097 days).
func civilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	era, doe := floorDiv(z, 146097)
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}
