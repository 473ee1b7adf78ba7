package cli

import "github.com/spf13/cobra"

// subcommands lists the constructors of every top-level command, in the
// order help shows them.
var subcommands = []func() *cobra.Command{
	newDemoCommand,
	newLsCommand,
	newCatCommand,
	newMountCommand,
	newExtractCommand,
	newSubvolumeCommand,
	newPropertyCommand,
	newFilesystemCommand,
	newInfoCommand,
	newCheckCommand,
	newMkfsCommand,
	NewDumpSuperCommand,
	NewDumpTreeCommand,
	NewBenchCommand,
	newEditCommand,
	newMkdirCommand,
	newRmdirCommand,
	newRmCommand,
	newMvCommand,
	newLnCommand,
	newMknodCommand,
	newChmodCommand,
	newChownCommand,
	newTouchCommand,
	newSetfattrCommand,
	newGetfattrCommand,
	newCpCommand,
	newWriteCommand,
	newTruncateCommand,
	newFallocateCommand,
	newChattrCommand,
	newLsattrCommand,
	newGetfaclCommand,
	newSetfaclCommand,
}
