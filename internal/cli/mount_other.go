//go:build !linux

package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newMountCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mount [-o OPTIONS] [-d DEVICE]... IMAGE|DEVICE MOUNTPOINT",
		Short: "Mount a filesystem image through FUSE (Linux only)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("mount needs Linux and FUSE")
		},
	}
}
