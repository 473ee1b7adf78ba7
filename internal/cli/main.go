package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of Main.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// usageError marks errors in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error (exit code 2).
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Main runs the gobtrfs command line with args (without the program name)
// and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return MainContext(context.Background(), args, stdin, stdout, stderr)
}

// MainContext is Main whose long work (mkfs, cp, extract) stops between
// steps once ctx is done.
func MainContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stderr, "gobtrfs %s: %v\n", commandPath(cmd), err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return ExitUsage
	}
	return ExitFailure
}

func commandPath(cmd *cobra.Command) string {
	if cmd == nil {
		return ""
	}
	p := cmd.CommandPath()
	if len(p) > len("gobtrfs ") {
		return p[len("gobtrfs "):]
	}
	return p
}

// flagError wraps cobra's flag parsing errors so they map to ExitUsage.
type flagError struct{ error }

func isCobraUsage(err error) bool {
	var fe flagError
	if errors.As(err, &fe) {
		return true
	}
	// cobra reports unknown commands and argument count errors as plain
	// errors; they all come from how the command was called.
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "gobtrfs",
		Short: "Read, change and create btrfs filesystems without the kernel",
		Long: `gobtrfs reads, changes and creates btrfs filesystems in image files and block
devices, in pure Go, without root, loop devices or the kernel's btrfs: what it
writes passes btrfs check and mounts on Linux.

Paths inside a filesystem are written IMAGE:PATH. A filesystem spread over
several devices names the others with -d/--device.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError{err} })
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// bgContext is the context of commands run outside cobra's Execute (demo).
func bgContext() context.Context { return context.Background() }
