// Package cli is the gobtrfs command line: one file per subcommand, each a
// thin layer of flag parsing and printing over the library packages.
//
// Exit codes, which scripts may rely on:
//
//	0  success
//	1  the operation failed, or (extract) finished but could not read
//	   everything; the reasons are on standard error
//	2  usage error: unknown command, bad flag or argument, no command at
//	   all, help for an unknown command
//
// Every message on standard error has one "gobtrfs CMD: " prefix and
// names paths as the user did (IMAGE:/PATH); a usage error ends with a
// "Try 'gobtrfs CMD --help'" line, as coreutils does (main.go, errmsg.go).
//
// Arguments of the form IMAGE:PATH name a path inside the filesystem in an
// image file or block device; other devices of a multi-device filesystem
// are given with -d/--device (repeatable; --device only for ls and the
// editing commands, where -d means what it means to ls, touch or getfattr).
//
// The editing commands (edit.go, editcmds*.go) are "words": each is one
// implementation shared by its top-level command, which opens the image,
// runs the word and commits once, and by `gobtrfs edit` scripts, which run
// many words in one open and commit at `commit` lines (docs/commands-edit.md).
//
// This package must never hold global state: Main builds a fresh command
// tree for every call, so tests run commands in parallel.
package cli
