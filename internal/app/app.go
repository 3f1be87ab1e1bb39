// Package app assembles the kube-reclaim command from the roles.
package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kube-reclaim/kube-reclaim/internal/cli"
	"github.com/kube-reclaim/kube-reclaim/internal/version"
)

// NewRootCommand returns the kube-reclaim command with every role.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kube-reclaim",
		Short: "Publish idle node capacity as extended resources and schedule batch pods onto it.",
		// Roles are subcommands; the bare command only prints help.
		SilenceUsage: true,
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version.",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version.String()) },
	})
	return root
}

// Main runs the command line and returns the exit code.
func Main() int { return cli.Execute(NewRootCommand()) }
