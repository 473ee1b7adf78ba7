package btrfstest_test

import (
	"fmt"
	"runtime"
	"testing"
)

// recorder is a testing.TB that records Fatal/Error/Skip instead of acting
// on the real test, so tests can prove that a harness function fails (or
// skips) when it must. Everything else goes to the embedded real test.
type recorder struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, r.msg+fmt.Sprintf(format, args...)
}

func (r *recorder) Error(args ...any) { r.failed, r.msg = true, r.msg+fmt.Sprint(args...) }

func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }

func (r *recorder) Fatal(args ...any) { r.Error(args...); runtime.Goexit() }

func (r *recorder) FailNow() { r.failed = true; runtime.Goexit() }

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) { r.Skipf("%s", fmt.Sprint(args...)) }

func (r *recorder) SkipNow() { r.Skip() }

// record runs f with a recorder on a goroutine of its own (Fatal and Skip
// end it with runtime.Goexit, as they end a test) and returns the recorder.
func record(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}
