// Package app assembles the kube-reclaim command from the roles.
package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/internal/cli"
	"github.com/kube-reclaim/kube-reclaim/internal/version"
	"github.com/kube-reclaim/kube-reclaim/publisher"
	"github.com/kube-reclaim/kube-reclaim/webhook"
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
	root.AddCommand(cli.Command("publisher", "Measure every node and publish its reclaimable CPU and memory (leader-elected).", publisher.NewOptions()))
	root.AddCommand(cli.Command("extender", "Serve the kube-scheduler extender that places pods onto reclaimed capacity without over-booking.", extender.NewOptions()))
	root.AddCommand(cli.Command("webhook", "Serve the mutating admission webhook that injects reclaimed resources into every node status write.", webhook.NewOptions()))
	return root
}

// Main runs the command line and returns the exit code.
func Main() int { return cli.Execute(NewRootCommand()) }
