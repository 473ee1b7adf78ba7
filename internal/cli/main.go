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
	if errors.Is(err, errShownHelp) {
		return ExitUsage
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "ERROR: %s\n", ee.err)
		}
		return ee.code
	}
	prefix := "gobtrfs"
	if cmd != nil {
		prefix = cmd.CommandPath()
	}
	var ue usageError
	usage := errors.As(err, &ue) || isCobraUsage(err)
	if usage {
		err = usageError{cobraWords(err)}
	}
	for _, m := range messages(err) {
		fmt.Fprintf(stderr, "%s: %s\n", prefix, m)
	}
	if !usage {
		return ExitFailure
	}
	// As coreutils: a usage error ends with where to read more.
	help := prefix
	if cmd == nil || cmd.Name() == "help" {
		help = "gobtrfs"
	}
	fmt.Fprintf(stderr, "Try '%s --help' for more information.\n", help)
	return ExitUsage
}

// sscan reports whether msg has exactly the form format.
func sscan(msg, format string, args ...any) bool {
	n, err := fmt.Sscanf(msg, format, args...)
	return err == nil && n == len(args)
}

// exitError ends a command with a given exit status after it printed
// what it had to say (gobtrfs check: 1 problems found, 2 could not run);
// err, when set, is printed as btrfs-progs prints errors.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// errShownHelp ends a command that printed its help instead of running:
// exit status 2, nothing more to say.
var errShownHelp = errors.New("help shown")

// cobraWords rewords cobra's argument count errors as coreutils words
// them.
func cobraWords(err error) error {
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command ") {
		return errors.New(strings.Replace(msg, ` for "gobtrfs"`, "", 1))
	}
	var want, got int
	switch {
	case strings.HasPrefix(msg, "requires at least") && strings.HasSuffix(msg, "only received 0"):
		return errors.New("missing operand")
	case strings.HasPrefix(msg, "accepts 0 arg(s)"):
		return errors.New("takes no operands")
	case sscan(msg, "accepts %d arg(s), received %d", &want, &got) && got < want:
		return fmt.Errorf("missing operand (takes %d)", want)
	case sscan(msg, "accepts %d arg(s), received %d", &want, &got):
		return fmt.Errorf("extra operand (takes %d)", want)
	case strings.HasPrefix(msg, "accepts ") || strings.HasPrefix(msg, "requires at"):
		return fmt.Errorf("wrong number of operands (%s)", msg)
	}
	return err
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
		Version:       version(),
	}
	root.SetVersionTemplate("gobtrfs {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError{err} })
	// No command at all: the help, on standard error, and exit status 2,
	// so that a script calling gobtrfs without a command fails.
	root.RunE = func(cmd *cobra.Command, args []string) error {
		cmd.SetOut(cmd.ErrOrStderr())
		if err := cmd.Help(); err != nil {
			return err
		}
		return errShownHelp
	}
	root.SetHelpCommand(newHelpCommand())
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// newHelpCommand replaces cobra's help command, which prints the help
// and exits 0 for a topic it does not know.
func newHelpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Help about any command",
		Long:  "Print the help of COMMAND (gobtrfs help subvolume list), or of gobtrfs.",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 || (len(args) > 0 && cmd == c.Root()) {
				return usagef("unknown command %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

// bgContext is the context of commands run outside cobra's Execute (demo).
func bgContext() context.Context { return context.Background() }
