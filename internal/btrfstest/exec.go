package btrfstest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// command renders a command line for error messages, quoting arguments that
// would otherwise be ambiguous.
func command(name string, args []string) string {
	parts := []string{name}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// runCmd runs a tool with a C locale (stable messages) and returns its
// combined output; the error carries the command line and the output, since
// the output is what explains a btrfs-progs failure.
func runCmd(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s", command(name, args), err, out)
	}
	return string(out), nil
}

// mustRun is runCmd that fails the test on error.
func mustRun(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := runCmd(name, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
